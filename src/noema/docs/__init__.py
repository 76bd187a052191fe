"""The document library: folders of the person's documents indexed by their
structure, searched and read by section.

`settings` holds the `[docs]` section, `formats` reads each format's outline,
`store` is the SQLite/FTS5 index, `indexer` brings it in line with the
folders under the access policy, `library` ties them to an agent and keeps
the index fresh, `tools` are what the model sees, and `samples` writes real
documents of every format for the demo, the tests and the benchmark.

Nothing is imported here: reading the configuration imports `settings`, and
an agent with no `[docs]` folders never loads the rest.
"""
