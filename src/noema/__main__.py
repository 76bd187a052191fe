"""`python -m noema`: the noema command."""

from .cli import main

main()
