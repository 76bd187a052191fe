"""How much the agent's process grows while the page fetch reads hostile bodies.

Each case is a document built to cost far more to read than its size: a
PDF whose one content stream inflates to 60 MB of drawing commands, a DOCX
whose document.xml unpacks to 100 MiB, 10 MB of `<p>` labelled text/html,
random bytes and a PDF labelled text/html, and a gzip-encoded body of 1 GiB
of zeros. Each runs in a fresh process: the real tool over HTTP against a
local server, with the peak RSS (VmHWM, reset before the call) compared to
the RSS before it. `--in-process` reads the text in the agent's own process
instead (as before the reader's worker), for comparison. Prints figures;
asserts nothing.

    PYTHONPATH=src .venv/bin/python bench/fetch_memory.py [--in-process] [--case NAME]

`--smoke` reads one case, the random bytes labelled text/html.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import io
import json
import os
import subprocess
import sys
import time
import zipfile
from pathlib import Path

CACHE = Path("/tmp/noema-bench-fetch-memory")
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"


def docx_bomb(size: int = 100 << 20) -> bytes:
    """A Word document whose document.xml unpacks to `size` bytes, in paragraphs."""
    from tests.fakes.web_server import WORD_PARTS

    paragraph = b"<w:p><w:r><w:t>" + b"a" * 1024 + b"</w:t></w:r></w:p>"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in WORD_PARTS.items():
            archive.writestr(name, data)
        with archive.open("word/document.xml", "w", force_zip64=True) as part:
            part.write(b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.'
                       b'openxmlformats.org/wordprocessingml/2006/main"><w:body>')
            for _ in range(size // len(paragraph)):
                part.write(paragraph)
            part.write(b"</w:body></w:document>")
    return buffer.getvalue()


def pdf_bomb() -> bytes:
    from tests.fakes.web_server import pdf_bomb as build

    return build(60_000_000)


CASES = {
    "pdf bomb": (pdf_bomb, "application/pdf", {}),
    "docx bomb": (docx_bomb, DOCX, {}),
    "10 MB of <p>": (lambda: b"<html><body>" + b"<p>x</p>" * 1_250_000, "text/html", {}),
    "random bytes as text/html": (lambda: os.urandom(10_000_000), "text/html", {}),
    "a PDF as text/html": (pdf_bomb, "text/html", {}),
    "gzip of 1 GiB of zeros": (lambda: gzip.compress(bytes(1 << 30), 9), "text/plain",
                               {"Content-Encoding": "gzip"}),
}


def status(field: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def one(case: str, in_process: bool) -> dict:
    """Run in a fresh process: the growth of this process while the tool reads `case`."""
    from noema.perception.untrusted import SessionDelimiter
    from noema.providers.base import ToolCall
    from noema.tools.registry import ToolContext, ToolRegistry
    from noema.web import WebSettings
    from noema.web import tools as web_tools_module
    from noema.web.extract import to_text
    from tests.fakes.web_server import WebServer

    make, media, headers = CASES[case]
    name = CACHE / (case.replace(" ", "_").replace("/", "_") + ".bin")
    if not name.exists():
        CACHE.mkdir(exist_ok=True)
        name.write_bytes(make())
    payload = name.read_bytes()
    if in_process:  # the agent's own process reads the text, as before the worker

        class InProcess:
            async def read_async(self, *args):
                return await asyncio.to_thread(to_text, *args)

        web_tools_module.shared_reader = InProcess
    with WebServer() as server:
        server.routes[("GET", "/doc")] = lambda q, b: (200, {"Content-Type": media, **headers},
                                                      payload)
        registry = ToolRegistry(web_tools_module.web_tools(
            WebSettings(allow_ranges=("127.0.0.0/8",)), {}, SessionDelimiter("0123456789ab")))
        if not in_process:
            from noema.web.reader import read_text

            read_text(b"warm", "text/plain", None, "http://warm/", False)  # the worker's start
        with open("/proc/self/clear_refs", "w") as refs:
            refs.write("5")  # the peak RSS starts again from now
        before = status("VmRSS")
        started = time.monotonic()
        call = ToolCall("c1", "web_get_content", json.dumps({"url": server.url("/doc")}))
        result = asyncio.run(registry.call(call, ToolContext("c1", 1, 1)))
        took = time.monotonic() - started
        peak = status("VmHWM")
    return {"case": case, "growth_mib": round((peak - before) / (1 << 20), 1),
            "seconds": round(took, 1), "said": result.content[:110].replace("\n", " ")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--in-process", action="store_true")
    parser.add_argument("--case", choices=sorted(CASES))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--smoke", action="store_true", help="one small case")
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.in_process)))
        return
    if args.smoke:
        args.case = "random bytes as text/html"
    for case in [args.case] if args.case else CASES:
        command = [sys.executable, __file__, "--one", case]
        if args.in_process:
            command.append("--in-process")
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=600)
            line = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-300:]
        except subprocess.TimeoutExpired:
            line = json.dumps({"case": case, "said": "still reading after 600 s"})
        print(shown(line), flush=True)


def shown(line: str) -> str:
    """A case's JSON line as a person reads it (anything else as it came)."""
    try:
        found = json.loads(line)
    except ValueError:
        return line
    if "growth_mib" not in found:
        return f"{found.get('case')}: {found.get('said')}"
    return (f"{found['case']}: the process grew {found['growth_mib']} MiB at its peak in "
            f"{found['seconds']} s; the tool said: {found['said']}")


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    main()
