"""Model providers: the neutral interface, the provider table, the adapters and our
retry policy."""
