"""The web page: chat, memory and the agent's state in a browser (`noema ui`)."""

from .server import PublicAddress, UiServer, check_address

__all__ = ["PublicAddress", "UiServer", "check_address"]
