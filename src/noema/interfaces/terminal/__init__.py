"""The terminal chat: the client of the attach protocol, its prompt, its screen and its
status line."""
