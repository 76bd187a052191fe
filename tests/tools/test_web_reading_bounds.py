"""Reading a fetched body costs bounded memory and time, whatever its bytes say:
a zip that unpacks to far more than its size, a body whose label lies, a
document that needs more memory or time than a reader may take. The agent's
own process grows by the body, never by what reading it costs."""

from __future__ import annotations

import io
import json
import zipfile
from collections.abc import Awaitable

import pytest
from hypothesis import given
from hypothesis import strategies as st

from noema.perception.untrusted import SessionDelimiter
from noema.providers.base import ToolCall
from noema.tools.errors import ToolError
from noema.tools.registry import ToolContext, ToolRegistry
from noema.web import WebSettings
from noema.web.extract import DOCX, ODT, UNPACKED_LIMIT
from noema.web.reader import Reader
from noema.web.tools import web_tools
from tests.fakes.web_server import WORD_PARTS, WebServer, page, pdf_bomb, pdf_bytes

MIB = 1 << 20


def zipped(parts: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def document_xml(text_bytes: int) -> bytes:
    """A Word document.xml holding `text_bytes` of text, in paragraphs of 1 KiB."""
    paragraph = b"<w:p><w:r><w:t>" + b"a" * 1024 + b"</w:t></w:r></w:p>"
    return (b'<?xml version="1.0"?><w:document xmlns:w="http://schemas.openxmlformats.org/'
            b'wordprocessingml/2006/main"><w:body>' + paragraph * (text_bytes // 1024)
            + b"</w:body></w:document>")


def rss(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(field)


async def growth_while(work: Awaitable) -> tuple[object, int]:
    """What `work` gives, and how far this process's RSS peaked above where it was."""
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # the peak (VmHWM) starts again from the RSS now
    before = rss("VmRSS")
    done = await work
    return done, rss("VmHWM") - before


@pytest.fixture(scope="module")
def site():
    with WebServer() as server:
        yield server


async def fetch(site: WebServer, path: str, media: str, payload: bytes):
    site.routes[("GET", path)] = page(media, payload)
    registry = ToolRegistry(web_tools(WebSettings(allow_ranges=("127.0.0.0/8",)), {},
                                      SessionDelimiter("0123456789ab")))
    call = ToolCall("c1", "web_get_content", json.dumps({"url": site.url(path)}))
    return await registry.call(call, ToolContext("c1", 1, 1))


async def test_a_docx_that_unpacks_past_the_limit_is_refused_and_costs_the_agent_nothing(site):
    bomb = zipped({**WORD_PARTS, "word/document.xml": document_xml(UNPACKED_LIMIT + MIB)})
    assert len(bomb) < MIB  # a small download
    result, growth = await growth_while(fetch(site, "/bomb.docx", DOCX, bomb))
    assert result.is_error and "MiB, more than the 32 MiB a document may unpack to" in \
        result.content, result.content
    assert growth < 24 * MIB, growth / MIB  # 139 MiB when the agent read it itself


@pytest.mark.parametrize("media, payload, holds", [
    ("text/html", pdf_bytes(["not a page"]), "holds a PDF document"),
    ("text/plain", zipped({"a.txt": b"x"}), "holds a zip archive"),
    ("text/html", bytes(range(256)) * 64, "holds binary data"),
])
async def test_a_body_whose_label_lies_is_refused(site, media, payload, holds):
    result = await fetch(site, "/lying", media, payload)
    assert result.is_error and f"is labelled {media} but {holds}" in result.content


async def test_utf16_text_is_not_taken_for_binary(site):
    site.routes[("GET", "/wide")] = lambda q, b: (
        200, {"Content-Type": "text/plain; charset=utf-16"}, "tides at Vigo".encode("utf-16"))
    registry = ToolRegistry(web_tools(WebSettings(allow_ranges=("127.0.0.0/8",)), {},
                                      SessionDelimiter("0123456789ab")))
    call = ToolCall("c1", "web_get_content", json.dumps({"url": site.url("/wide")}))
    result = await registry.call(call, ToolContext("c1", 1, 1))
    assert not result.is_error and "tidesˆatˆVigo" in result.content


def test_a_document_needing_more_memory_than_the_reader_may_take_is_stopped():
    """A PDF of 24 KB whose page inflates to 8 MB of drawing commands, read by a
    reader allowed 8 MiB: the worker's own bound stops it, the message says so,
    and the next document is read by a fresh worker."""
    reader = Reader(base_memory=8 * MIB)
    try:
        with pytest.raises(ToolError, match=r"needs more than 8 MiB"):
            reader.read(pdf_bomb(8_000_000), "application/pdf", None,
                        "http://site.example/bomb.pdf", False)
        assert reader.read(b"after it", "text/plain", None, "http://x.example/", False) \
            == "after it"
    finally:
        reader.close()


def test_a_document_taking_longer_than_the_reader_may_is_stopped():
    reader = Reader(timeout_s=1)
    endless = b"<html><body>" + b"<p>x</p>" * 1_000_000  # minutes of work for an HTML reader
    try:
        with pytest.raises(ToolError, match="took longer than 1 s and was stopped"):
            reader.read(endless, "text/html", None, "http://site.example/", False)
        assert reader.read(b"after it", "text/plain", None, "http://x.example/", False) \
            == "after it"
    finally:
        reader.close()


def test_an_odt_is_held_to_the_unpack_limit_too():
    reader = Reader()
    bomb = zipped({"mimetype": b"application/vnd.oasis.opendocument.text",
                   "content.xml": b"<x>" + b"a" * (UNPACKED_LIMIT + MIB) + b"</x>"})
    try:
        with pytest.raises(ToolError, match="ODT document .* unpacks to 33 MiB"):
            reader.read(bomb, ODT, None, "http://site.example/bomb.odt", False)
    finally:
        reader.close()


async def test_a_compressed_body_is_unpacked_only_up_to_the_size_cap(site):
    """64 MiB of text in 64 KB of gzip: the transfer decoding stops at the cap
    ([web] max_bytes, 1 MiB here), so the agent never holds the rest."""
    import gzip

    packed = gzip.compress(b"a" * (64 * MIB), 9)
    site.routes[("GET", "/packed")] = lambda q, b: (
        200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}, packed)
    registry = ToolRegistry(web_tools(WebSettings(allow_ranges=("127.0.0.0/8",), max_bytes=MIB),
                                      {}, SessionDelimiter("0123456789ab")))
    call = ToolCall("c1", "web_get_content", json.dumps({"url": site.url("/packed")}))
    result, growth = await growth_while(registry.call(call, ToolContext("c1", 1, 1)))
    assert not result.is_error, result.content
    assert f"{MIB} characters of text; the response was cut at the {MIB}-byte" in result.content
    assert growth < 16 * MIB, growth / MIB


def test_the_reader_gets_none_of_the_agent_s_secrets(monkeypatch):
    """What reads hostile bytes is started without the agent's environment."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-in-the-reader-0123456789")
    reader = Reader()
    try:
        reader.read(b"x", "text/plain", None, "http://x.example/", False)
        with open(f"/proc/{reader._proc.pid}/environ", "rb") as environ:
            assert b"sk-never-in-the-reader" not in environ.read()
    finally:
        reader.close()


async def test_a_cancelled_fetch_stops_its_reading_at_once():
    """Stop while a costly document is read: the worker is killed, not left to
    finish, and the next document is read by a fresh one."""
    import asyncio
    import os

    reader = Reader(timeout_s=120)
    endless = b"<html><body>" + b"<p>x</p>" * 1_000_000
    try:
        reading = asyncio.create_task(reader.read_async(endless, "text/html", None,
                                                        "http://site.example/", False))
        while reader._proc is None:  # the worker has started on it
            await asyncio.sleep(0.01)
        busy = reader._proc.pid
        reading.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reading
        text = await reader.read_async(b"after it", "text/plain", None, "http://x.example/",
                                       False)
        assert text == "after it" and reader._proc.pid != busy
        with pytest.raises(ProcessLookupError):
            os.kill(busy, 0)  # the busy worker is gone, reaped
    finally:
        reader.close()


async def test_cancelling_a_waiting_fetch_leaves_the_reading_under_way_alone():
    import asyncio

    reader = Reader(timeout_s=120)
    page = b"<html><body>" + b"<p>some words here</p>" * 50_000
    try:
        first = asyncio.create_task(reader.read_async(page, "text/html", None,
                                                      "http://site.example/a", False))
        while reader._job is None:  # the first is being read
            await asyncio.sleep(0.01)
        waiting = asyncio.create_task(reader.read_async(b"later", "text/plain", None,
                                                        "http://site.example/b", False))
        await asyncio.sleep(0.05)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert "some words here" in await first  # read whole, not killed for the other
    finally:
        reader.close()


words = st.lists(st.text(alphabet="abcdefghij ", min_size=1, max_size=12).filter(str.strip),
                 min_size=1, max_size=20)


@given(words, words)
def test_a_page_too_costly_for_a_tree_still_gives_its_visible_text_in_order(shown, hidden):
    """When the tree builder gives up (lxml out of the worker's memory), the
    page's text comes from a tokenizer that builds no tree: every visible word
    in order, nothing of its scripts or styles."""
    from noema.web.extract import _bare_text

    page = "<html><head><title>t</title></head><body>" + "".join(
        f"<div><p>{w}</p><script>{h}</script><style>{h}</style></div>"
        for w, h in zip(shown, hidden * len(shown))) + "</body></html>"
    assert _bare_text(page).split("\n") == [w.strip() for w in shown]


def test_the_html_reader_falls_back_to_the_tokenizer_when_the_tree_gives_nothing(monkeypatch):
    import trafilatura

    from noema.web.extract import html_text

    monkeypatch.setattr(trafilatura, "extract", lambda *a, **k: None)
    monkeypatch.setattr(trafilatura, "html2txt", lambda *a, **k: "")
    assert html_text(b"<p>tides at Vigo</p><script>x()</script>", None, "http://x/") == \
        "tides at Vigo"
