"""The ways a person meets the agent: the terminal chat, the demo, and the functions behind
`noema history/undo/memory/lab`."""
