"""The safety net of the agent's hands.

settings (what the person configures), policy (which paths), fsafe (opening
and atomic writing that links cannot redirect), changes and worktree (what
changed in a workspace), history and versioning (the git repository of each
workspace), undo (restore and undo), sandbox (bubblewrap), approvals
(autonomy levels). The tools built on them live in `noema.tools.files`,
`noema.tools.shell` and `noema.tools.hands`.
"""
