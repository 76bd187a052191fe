"""An MCP server over stdio in the standard library alone, for a virtual
environment that holds nothing but Python itself.

It speaks the protocol's JSON-RPC lines (initialize, the initialized
notification, ping, tools/list, tools/call) and offers two read-only tools:
`where`, that says which interpreter runs it, and `unix_connect`, that tries
to reach a Unix socket by its path and says what happened. Run with `python -m` from a
folder that holds this file, or as a script.
"""

from __future__ import annotations

import json
import os
import socket
import sys

TOOLS = [{
    "name": "where",
    "description": "Say which Python runs this server.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": {"readOnlyHint": True},
}, {
    "name": "unix_connect",
    "description": "Try to connect to the Unix socket at `path`.",
    "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]},
    "annotations": {"readOnlyHint": True},
}]


def answer(request: dict) -> dict | None:
    """The response to one message (None for a notification)."""
    method, ident = request.get("method"), request.get("id")
    if ident is None:
        return None
    if method == "initialize":
        result = {
            "protocolVersion": request["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "stdlib-server", "version": "1"},
        }
    elif method == "ping":
        result = {}
    elif method == "tools/list":
        result = {"tools": TOOLS}
    elif method == "tools/call" and request["params"]["name"] == "where":
        text = f"prefix={sys.prefix} executable={sys.executable} umask={_umask():04o}"
        result = {"content": [{"type": "text", "text": text}], "isError": False}
    elif method == "tools/call" and request["params"]["name"] == "unix_connect":
        result = {"content": [{"type": "text", "text": _connect(
            request["params"]["arguments"]["path"])}], "isError": False}
    else:
        return {"jsonrpc": "2.0", "id": ident,
                "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def _connect(path: str) -> str:
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(5)
            sock.connect(path)
            sock.sendall(b"hello from the server\n")
    except OSError as exc:
        return f"refused: {exc}"
    return "connected"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def main() -> None:
    for line in sys.stdin:
        if not line.strip():
            continue
        response = answer(json.loads(line))
        if response is not None:
            sys.stdout.write(json.dumps(response) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
