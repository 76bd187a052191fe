"""The ways a person meets the agent, a room each: the terminal chat (`terminal`), the
host that owns the agent and speaks the attach protocol (`host`), the web page (`web`)
and the command-line subcommands (`commands`)."""
