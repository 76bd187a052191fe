"""Tools the model may call: the registry, the built-in tools, and the file and shell tools
(`hands.py` assembles them)."""
