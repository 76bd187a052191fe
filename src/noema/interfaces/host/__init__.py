"""The host that owns an agent: the attach protocol, its socket, and the service unit
that keeps `noema run` going."""
