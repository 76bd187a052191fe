"""Readable text of what a fetch brings back: the main text of a web page
(without menus and footers), the pages of a PDF, the paragraphs of a DOCX or
ODT document, or plain text as it is."""

from __future__ import annotations

import io
from collections.abc import Callable
from html.parser import HTMLParser

from ..tools.errors import ToolError

HTML = frozenset({"text/html", "application/xhtml+xml"})
PLAIN = frozenset({
    "text/plain", "text/markdown", "text/x-markdown", "text/csv", "text/xml",
    "application/xml", "application/json", "application/ld+json", "text/rss+xml",
    "application/rss+xml", "application/atom+xml",
})
PDF = "application/pdf"
DOCX = "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
ODT = "application/vnd.oasis.opendocument.text"
READABLE = HTML | PLAIN | {PDF, DOCX, ODT}


def decode(body: bytes, charset: str | None) -> str:
    """Bytes as text in the declared charset, UTF-8 if none or unknown."""
    try:
        return body.decode(charset or "utf-8", errors="replace")
    except LookupError:
        return body.decode("utf-8", errors="replace")


def html_text(body: bytes, charset: str | None, url: str) -> str:
    """The main text of a page, headings and lists kept as Markdown."""
    import trafilatura  # slow to import; only a fetch of HTML needs it

    html = decode(body, charset)
    text = trafilatura.extract(
        html, url=url, output_format="markdown", include_comments=False,
        include_tables=True, include_links=False, favor_recall=True,
    )
    if not text:  # a page with no main text (a form, a list of links): all of its text
        text = trafilatura.html2txt(html)
    if not text:  # lxml gave up (in the reader's worker: its memory bound), or no tree at all
        text = _bare_text(html)
    return text or ""


class _TextOnly(HTMLParser):
    """Text nodes in document order, without what a browser does not show."""

    _HIDDEN = frozenset({"script", "style", "template", "noscript", "head"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._hidden = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag in self._HIDDEN:
            self._hidden += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in self._HIDDEN and self._hidden:
            self._hidden -= 1

    def handle_data(self, data: str) -> None:
        if not self._hidden and data.strip():
            self.parts.append(data.strip())


def _bare_text(html: str) -> str:
    """A page's text by the standard library's tokenizer, which builds no tree:
    its memory is the text it keeps, whatever the markup's shape."""
    reader = _TextOnly()
    for start in range(0, len(html), 1 << 16):
        reader.feed(html[start:start + (1 << 16)])
    reader.close()
    return "\n".join(reader.parts)


def pdf_text(body: bytes) -> str:
    """The text of every page, each under a `[page N]` line."""
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(body))
    pages = []
    for number, page in enumerate(reader.pages, start=1):
        pages.append(f"[page {number}]\n{(page.extract_text() or '').strip()}")
    return "\n\n".join(pages)


def docx_text(body: bytes) -> str:
    """Paragraphs (headings as Markdown) and table rows of a Word document."""
    import docx

    document = docx.Document(io.BytesIO(body))
    lines = []
    for paragraph in document.paragraphs:
        style = (paragraph.style.name if paragraph.style is not None else "") or ""
        level = style.removeprefix("Heading ").strip()
        prefix = "#" * int(level) + " " if style.startswith("Heading ") and level.isdigit() else ""
        if paragraph.text.strip():
            lines.append(prefix + paragraph.text)
    for table in document.tables:
        for row in table.rows:
            lines.append(" | ".join(cell.text.strip() for cell in row.cells))
    return "\n\n".join(lines)


def odt_text(body: bytes) -> str:
    """Headings (as Markdown) and paragraphs of an OpenDocument text, in order."""
    from odf import opendocument, teletype
    from odf.namespaces import TEXTNS

    document = opendocument.load(io.BytesIO(body))
    lines: list[str] = []

    def walk(node) -> None:
        for child in node.childNodes:
            if child.qname == (TEXTNS, "h"):
                level = child.getAttribute("outlinelevel") or "1"
                lines.append("#" * int(level) + " " + teletype.extractText(child))
            elif child.qname == (TEXTNS, "p"):
                text = teletype.extractText(child)
                if text.strip():
                    lines.append(text)
            elif child.nodeType == child.ELEMENT_NODE:
                walk(child)

    walk(document.text)
    return "\n\n".join(lines)


_BINARY: dict[str, tuple[str, Callable[[bytes], str]]] = {
    PDF: ("PDF", pdf_text), DOCX: ("DOCX", docx_text), ODT: ("ODT", odt_text),
}


# What a DOCX or ODT may unpack to: its parts are read whole and parsed into
# a tree several times their size.
UNPACKED_LIMIT = 32 << 20
_MAGIC = {b"%PDF-": "a PDF document", b"PK\x03\x04": "a zip archive",
          b"\x89PNG": "a PNG image", b"\xff\xd8\xff": "a JPEG image", b"GIF8": "a GIF image",
          b"\x1f\x8b": "gzip-compressed data"}


def binary_in_text(body: bytes, charset: str | None) -> str | None:
    """What a body labelled as text really holds, when it is plainly not text."""
    for magic, words in _MAGIC.items():
        if body.startswith(magic):
            return words
    head = body[:8192]
    wide = (charset or "").lower().replace("-", "").startswith(("utf16", "utf32"))
    if b"\x00" in head and not wide:  # no text but UTF-16 and UTF-32 has NUL bytes
        return "binary data"
    return None


def check_unpacked(body: bytes, name: str, url: str) -> None:
    """Refuse a DOCX or ODT whose parts unpack to more than `UNPACKED_LIMIT`.

    The sizes read are those the archive declares; reading a part never
    yields more than its declared size (zipfile stops there and checks the
    CRC), so they bound what the readers will unpack.
    """
    import zipfile

    try:
        with zipfile.ZipFile(io.BytesIO(body)) as archive:
            total = sum(item.file_size for item in archive.infolist())
    except (zipfile.BadZipFile, ValueError, OSError):
        raise ToolError(f"the {name} document at {url} is not a valid zip archive") from None
    if total > UNPACKED_LIMIT:
        raise ToolError(
            f"the {name} document at {url} unpacks to {total >> 20} MiB, more than the "
            f"{UNPACKED_LIMIT >> 20} MiB a document may unpack to; it was not read"
        )


def to_text(body: bytes, media_type: str, charset: str | None, url: str, truncated: bool) -> str:
    """The readable text of a body; a ToolError if it cannot be read.

    Run it in the reader's worker (`reader.py`), whose memory and time are
    bounded: these checks give the common hostile cases a clear message, the
    worker's bounds hold for the rest."""
    if media_type in HTML or media_type in PLAIN:
        found = binary_in_text(body, charset)
        if found is not None:
            raise ToolError(f"{url} is labelled {media_type} but holds {found}; it was not read")
    if media_type in HTML:
        return html_text(body, charset, url)
    if media_type in PLAIN:
        return decode(body, charset)
    name, reader = _BINARY[media_type]
    if truncated:  # a document cut in the middle cannot be opened at all
        raise ToolError(
            f"the {name} document at {url} is larger than the size cap ([web] max_bytes = "
            f"{len(body)}); it cannot be read"
        )
    if media_type in (DOCX, ODT):
        check_unpacked(body, name, url)
    try:
        return reader(body)
    except MemoryError:
        raise  # the worker's bound: it says so itself
    except Exception as exc:  # a damaged or hostile file: each library fails its own way
        raise ToolError(
            f"the {name} document at {url} could not be read ({type(exc).__name__})"
        ) from None
