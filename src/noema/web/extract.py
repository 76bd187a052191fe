"""Readable text of what a fetch brings back: the main text of a web page
(without menus and footers), the pages of a PDF, the paragraphs of a DOCX or
ODT document, or plain text as it is."""

from __future__ import annotations

import io
from collections.abc import Callable

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
    return text or ""


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


def to_text(body: bytes, media_type: str, charset: str | None, url: str, truncated: bool) -> str:
    """The readable text of a body; a ToolError if it cannot be read."""
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
    try:
        return reader(body)
    except Exception as exc:  # a damaged or hostile file: each library fails its own way
        raise ToolError(
            f"the {name} document at {url} could not be read ({type(exc).__name__})"
        ) from None
