"""Narrative memory: the turn store, the session, save points and the chronicler,
search and recall."""
