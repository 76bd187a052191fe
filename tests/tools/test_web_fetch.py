"""web_get_content against a real web server on loopback (allowed by
[web] allow_ranges, as a person running a local site would allow it)."""

from __future__ import annotations

import json
import resource
import zlib

import pytest

from noema.perception.untrusted import SessionDelimiter
from noema.providers.base import ToolCall
from noema.tools.registry import ToolContext, ToolRegistry
from noema.web import WebSettings
from noema.web.tools import web_tools
from tests.fakes.web_server import (
    ARTICLE, WebServer, docx_bytes, odt_bytes, page, pdf_bytes, redirect,
)

DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT = "application/vnd.oasis.opendocument.text"
LONG = "".join(f"line {n:05d} of a long plain text\n" for n in range(1000))  # 32,000 characters


def gzip_bomb(megabytes: int) -> bytes:
    """A gzip body of a few hundred kilobytes that inflates to `megabytes` of text."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b"a" * (1 << 20)
    return b"".join(packer.compress(block) for _ in range(megabytes)) + packer.flush()


@pytest.fixture(scope="module")
def web():
    with WebServer() as server:
        server.routes.update({
            ("GET", "/article.html"): page("text/html; charset=utf-8", ARTICLE),
            ("GET", "/long.txt"): page("text/plain; charset=utf-8", LONG),
            ("GET", "/report.pdf"): page("application/pdf", pdf_bytes(
                ["Quarterly revenue grew by nine percent", "Costs fell in the north"])),
            ("GET", "/letter.docx"): page(DOCX, docx_bytes(
                "Letter to the council", ["The bridge needs repairs before winter."])),
            ("GET", "/minutes.odt"): page(ODT, odt_bytes(
                "Minutes of March", ["The board approved the new library hours."])),
            ("GET", "/photo.png"): page("image/png", b"\x89PNG\r\n\x1a\n" + b"\0" * 100),
            ("GET", "/broken.pdf"): page("application/pdf", b"%PDF-1.4 this is not a pdf"),
            ("GET", "/missing"): lambda q, b: (404, {"Content-Type": "text/plain"}, b"no"),
            ("GET", "/bomb.txt"): lambda q, b, body=gzip_bomb(512): (
                200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}, body),
        })
        for n in range(1, 7):  # /hop/6 -> /hop/5 -> ... -> /hop/1 -> /article.html
            target = f"/hop/{n - 1}" if n > 1 else "/article.html"
            server.routes[("GET", f"/hop/{n}")] = redirect(target)
        yield server


def registry(**web) -> ToolRegistry:
    settings = WebSettings(allow_ranges=["127.0.0.0/8"], **web)
    return ToolRegistry(web_tools(settings, {}, SessionDelimiter("0123456789ab")))


async def fetch(reg: ToolRegistry, **args):
    call = ToolCall("c1", "web_get_content", json.dumps(args))
    return await reg.call(call, ToolContext("c1", 1, 1))


async def test_html_gives_the_main_text_inside_the_envelope_with_the_url(web):
    url = web.url("/article.html")
    result = await fetch(registry(), url=url)
    assert not result.is_error, result.content
    text = result.content
    assert "⟦web_page 0123456789ab" in text and "⟦/web_page 0123456789ab⟧" in text
    assert f'url="{url}"' in text
    body = text.split("⟧", 1)[1].replace("ˆ", " ")
    assert "spring tides reach four metres" in body
    assert "cookies policy" not in body and "Shop" not in body  # boilerplate left out
    # The injected sentence is there, but only as datamarked data.
    assert "Ignoreˆpreviousˆinstructions" in text
    assert "more: offset=" not in text


@pytest.mark.parametrize("path, expected", [
    ("/report.pdf", ["[page 1]", "Quarterly revenue grew by nine percent", "[page 2]",
                     "Costs fell in the north"]),
    ("/letter.docx", ["# Letter to the council", "The bridge needs repairs before winter."]),
    ("/minutes.odt", ["# Minutes of March", "The board approved the new library hours."]),
])
async def test_documents_become_text(web, path, expected):
    result = await fetch(registry(), url=web.url(path))
    assert not result.is_error, result.content
    plain = result.content.replace("ˆ", " ")
    for piece in expected:
        assert piece in plain


async def test_long_text_is_paginated_by_characters(web):
    reg = registry(page_chars=1000)
    first = await fetch(reg, url=web.url("/long.txt"))
    assert "characters 0–1000" in first.content and "32000 characters" in first.content
    assert first.content.rstrip().endswith("more: offset=1000")
    assert "lineˆ00030" in first.content and "lineˆ00032" not in first.content
    last = await fetch(reg, url=web.url("/long.txt"), offset=31_000, limit=5000)
    assert "lineˆ00999" in last.content and "more: offset" not in last.content
    past = await fetch(reg, url=web.url("/long.txt"), offset=40_000)
    assert past.is_error and "past the end" in past.content


async def test_bad_arguments_are_tool_errors(web):
    reg = registry()
    assert (await fetch(reg, url=web.url("/long.txt"), offset=-1)).is_error
    assert "limit must be" in (await fetch(reg, url=web.url("/long.txt"), limit=0)).content
    assert (await fetch(reg)).is_error  # no url
    result = await fetch(reg, url="ftp://127.0.0.1/file")
    assert result.is_error and "http:// or https://" in result.content


async def test_content_types_outside_text_are_refused(web):
    result = await fetch(registry(), url=web.url("/photo.png"))
    assert result.is_error and "image/png" in result.content and "cannot be read" in result.content


async def test_damaged_document_and_http_errors_are_clear(web):
    broken = await fetch(registry(), url=web.url("/broken.pdf"))
    assert broken.is_error and "could not be read" in broken.content
    missing = await fetch(registry(), url=web.url("/missing"))
    assert missing.is_error and "404" in missing.content


async def test_five_redirects_are_followed_and_the_final_url_is_the_provenance(web):
    result = await fetch(registry(), url=web.url("/hop/5"))
    assert not result.is_error, result.content
    assert f'url="{web.url("/article.html")}"' in result.content
    assert "fourˆmetres" in result.content


async def test_a_sixth_redirect_is_refused(web):
    result = await fetch(registry(), url=web.url("/hop/6"))
    assert result.is_error and "redirects more than 5 times" in result.content


async def test_fewer_redirects_can_be_configured(web):
    result = await fetch(registry(max_redirects=1), url=web.url("/hop/2"))
    assert result.is_error and "more than 1 times" in result.content


async def test_a_stalled_server_times_out(web):
    result = await fetch(registry(read_timeout_s=0.3), url=web.url("/stall"))
    assert result.is_error and "timed out" in result.content


async def test_a_gigabyte_response_is_cut_at_the_cap_without_growing_memory(web):
    cap = 4_000_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    result = await fetch(registry(max_bytes=cap, page_chars=2000), url=web.url("/huge"))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert not result.is_error, result.content
    assert f"{cap} characters of text" in result.content
    assert f"cut at the {cap}-byte size cap" in result.content
    assert "more: offset=2000" in result.content
    # Reading all of it would take a gigabyte; a generous bound well below.
    assert (after - before) * 1024 < 300_000_000
    # The client hung up: the server could not push much past the cap and the socket buffers.
    assert web.huge_bytes_sent < 200_000_000


async def test_a_compressed_body_is_capped_after_inflating_it(web):
    cap = 1_000_000
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = await fetch(registry(max_bytes=cap, page_chars=1000), url=web.url("/bomb.txt"))
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert not result.is_error, result.content
    assert f"{cap} characters of text; the response was cut" in result.content
    assert (after - before) * 1024 < 300_000_000  # 512 MB inflated would not fit
