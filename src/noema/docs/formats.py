"""A document's structure from its bytes: title, headings in reading order,
the text under each, and the page where each starts when the format has pages.

One reader per format, chosen by the file's suffix (`READERS`). Each returns
a flat list of `Section`s with their heading level; the nesting is derived
from the levels when the outline is stored. Text that comes before the first
heading becomes an opening section at level 0.

PDF: the document's own outline (bookmarks) when it has one, each entry
starting on its page at the place where its title appears in the page text
(or at the top of the page when the title is not found); without an outline,
one section per page. Guessing headings from font sizes was left out: it is
wrong often enough on real papers that a page is the more honest unit.
DOCX and ODT have headings but no pages (pages exist only once a word
processor lays the text out), so their sections have no page numbers.
"""

from __future__ import annotations

import functools
import io
import logging
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import PurePath

from ..perception.untrusted import strip_invisible

OPENING = "(before the first heading)"

# pypdf logs every oddity of a damaged file as a warning; the indexer reports
# the one reason that matters, so the terminal is not flooded with them.
logging.getLogger("pypdf").setLevel(logging.ERROR)


class UnreadableDocument(Exception):
    """The file could not be read as its format (corrupt, encrypted, not text)."""


@dataclass(frozen=True, slots=True)
class Section:
    """One heading and the text under it, up to the next heading of any level."""

    level: int  # 1 for a top heading; 0 for the text before the first heading
    heading: str
    text: str
    page: int | None = None  # 1-based, where the section starts (PDF only)


@dataclass(frozen=True, slots=True)
class Outline:
    """What a reader found in one document."""

    title: str
    sections: tuple[Section, ...]
    pages: int | None = None  # PDF only


def supported(name: str) -> bool:
    """Whether a file of this name has a reader."""
    return PurePath(name).suffix.lower() in READERS


def extract(name: str, data: bytes) -> Outline:
    """The outline of the document `name` (its suffix picks the reader), with
    invisible characters removed from every heading and text."""
    suffix = PurePath(name).suffix.lower()
    reader = READERS.get(suffix)
    if reader is None:
        raise UnreadableDocument(f"no reader for {suffix or 'files without a suffix'}")
    try:
        outline = reader(data, PurePath(name).stem)
    except UnreadableDocument:
        raise
    except Exception as exc:  # a library's complaint about a damaged file
        raise UnreadableDocument(f"{type(exc).__name__}: {exc}".strip()[:300]) from exc
    return _cleaned(outline)


def _cleaned(outline: Outline) -> Outline:
    sections = tuple(
        Section(s.level, _one_line(strip_invisible(s.heading)) or "(untitled)",
                _tidy(strip_invisible(s.text)), s.page)
        for s in outline.sections
        if s.level > 0 or s.text.strip()
    )
    title = _one_line(strip_invisible(outline.title))
    return Outline(title, sections, outline.pages)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


_BLANK_RUNS = re.compile(r"\n[ \t]*(?:\n[ \t]*){2,}")


def _tidy(text: str) -> str:
    """Trailing spaces gone and runs of blank lines cut to one."""
    lines = "\n".join(line.rstrip() for line in text.strip().splitlines())
    return _BLANK_RUNS.sub("\n\n", lines)


def _decode(data: bytes) -> str:
    if b"\x00" in data[:8192]:
        raise UnreadableDocument("it holds binary data, not text")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return data.decode("cp1252", errors="replace")


class _Sections:
    """Sections built in reading order: text goes to the section opened last."""

    def __init__(self) -> None:
        self.done: list[Section] = []
        self._level, self._heading = 0, OPENING
        self._parts: list[str] = []

    def open(self, level: int, heading: str) -> None:
        self.close()
        self._level, self._heading = level, heading

    def add(self, text: str) -> None:
        self._parts.append(text)

    def close(self, join: str = "\n") -> list[Section]:
        """Close the open section; every section so far."""
        self.done.append(Section(self._level, self._heading, join.join(self._parts)))
        self._parts = []
        return self.done


def _first_top_heading(sections: list[Section], fallback: str) -> str:
    return next((s.heading for s in sections if s.level == 1), fallback)


# -- plain text --------------------------------------------------------------------

_TEXT_PART_CHARS = 8000


def read_text(data: bytes, stem: str) -> Outline:
    """Plain text has no headings: parts of about 8,000 characters, cut at
    blank lines and named by their line numbers, so a search points somewhere."""
    lines = _decode(data).splitlines()
    sections: list[Section] = []
    start, size = 0, 0
    for number, line in enumerate(lines):
        size += len(line) + 1
        # A part ends at a blank line once it is long enough (or, with no
        # blank line in sight, at four times that).
        full = size >= _TEXT_PART_CHARS and not line.strip() or size >= 4 * _TEXT_PART_CHARS
        if full or number == len(lines) - 1:
            sections.append(Section(1, f"lines {start + 1}–{number + 1}",
                                    "\n".join(lines[start:number + 1])))
            start, size = number + 1, 0
    return Outline(stem, tuple(sections))


# -- Markdown ------------------------------------------------------------------------

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)
_FRONT_TITLE = re.compile(r"^title:\s*(.+?)\s*$", re.MULTILINE)


@functools.cache
def _markdown_parser():
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark")  # building the parser costs more than a short file


def read_markdown(data: bytes, stem: str) -> Outline:
    """ATX and setext headings as CommonMark reads them (never a '#' inside a
    code block); a YAML front matter `title:` names the document."""
    text = _decode(data)
    title = ""
    front = _FRONT_MATTER.match(text)
    if front:
        found = _FRONT_TITLE.search(front.group(1))
        title = found.group(1).strip("'\"") if found else ""
        # Blank lines in its place keep the line numbers of the rest.
        text = "\n" * front.group(0).count("\n") + text[front.end():]
    lines = text.splitlines()
    tokens = _markdown_parser().parse(text)
    marks: list[tuple[int, int, int, str]] = []  # level, first line, line after, heading
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.map:
            marks.append((int(token.tag[1]), token.map[0], token.map[1], tokens[i + 1].content))
    sections = [Section(0, OPENING, "\n".join(lines[: marks[0][1] if marks else len(lines)]))]
    for n, (level, _first, after, heading) in enumerate(marks):
        end = marks[n + 1][1] if n + 1 < len(marks) else len(lines)
        sections.append(Section(level, heading, "\n".join(lines[after:end])))
    return Outline(title or _first_top_heading(sections, stem), tuple(sections))


# -- HTML -----------------------------------------------------------------------------

_HEADING_TAGS = {f"h{n}": n for n in range(1, 7)}
_SKIPPED_TAGS = frozenset({"script", "style", "noscript", "template", "head", "svg", "iframe"})
_BLOCK_TAGS = frozenset({
    "p", "div", "br", "li", "tr", "table", "section", "article", "blockquote", "pre",
    "ul", "ol", "dl", "dt", "dd", "header", "footer", "nav", "aside", "main", "figure",
    "figcaption", "hr", "form", "fieldset", "address", "details", "summary",
})


def _walk_html(element, sections: _Sections) -> None:
    """Text in document order; an h1–h6 opens a section."""
    tag = element.tag.lower() if isinstance(element.tag, str) else None
    if tag is None or tag in _SKIPPED_TAGS:
        return  # comments, processing instructions, scripts: their tail is the caller's
    if tag in _HEADING_TAGS:
        sections.open(_HEADING_TAGS[tag], element.text_content())
        return
    if element.text:
        sections.add(element.text)
    for child in element:
        _walk_html(child, sections)
        if child.tail:
            sections.add(child.tail)
    if tag in _BLOCK_TAGS:
        sections.add("\n")


def _html_lines(section: Section) -> Section:
    """Runs of spaces inside each line cut to one, as a browser shows them."""
    text = "\n".join(" ".join(line.split()) for line in section.text.split("\n"))
    return Section(section.level, section.heading, text)


def read_html(data: bytes, stem: str) -> Outline:
    """Headings h1–h6 open sections; scripts, styles and the head are left out."""
    import lxml.html

    if not data.strip():
        return Outline(stem, ())
    root = lxml.html.document_fromstring(data)
    title_el = root.find(".//title")
    title = title_el.text_content().strip() if title_el is not None else ""
    builder = _Sections()
    body = root.find("body")
    _walk_html(body if body is not None else root, builder)
    sections = [_html_lines(s) for s in builder.close(join="")]
    return Outline(title or _first_top_heading(sections, stem), tuple(sections))


# -- PDF ------------------------------------------------------------------------------


def read_pdf(data: bytes, stem: str) -> Outline:
    """Sections from the PDF outline, or one per page without one."""
    import pypdf

    reader = pypdf.PdfReader(io.BytesIO(data))
    if reader.is_encrypted and not reader.decrypt(""):
        raise UnreadableDocument("it is encrypted with a password")
    pages = [page.extract_text() or "" for page in reader.pages]
    meta = reader.metadata
    title = str(meta.title).strip() if meta is not None and meta.title else stem
    entries = list(_pdf_outline(reader))
    if not entries:
        sections = [Section(1, f"page {n}", text, n) for n, text in enumerate(pages, 1)]
        return Outline(title, tuple(sections), len(pages))
    return Outline(title, tuple(_split_pages(pages, entries)), len(pages))


def _pdf_outline(reader) -> Iterator[tuple[int, str, int]]:
    """(level, title, 0-based page) of each outline entry with a page, in order."""

    def walk(items, level: int) -> Iterator[tuple[int, str, int]]:
        for item in items:
            if isinstance(item, list):  # the children of the entry before it
                yield from walk(item, level + 1)
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:  # an entry pointing nowhere usable: left out
                continue
            if page is not None and 0 <= page < len(reader.pages):
                yield level, str(item.title or ""), page

    try:
        yield from walk(reader.outline, 1)
    except Exception:  # a damaged outline: the pages still make sections
        return


def _split_pages(pages: list[str], entries: list[tuple[int, str, int]]) -> list[Section]:
    """Each entry's text runs from where its title appears on its page to where
    the next entry starts; positions never go backwards."""
    starts, offset = [], 0
    for text in pages:
        starts.append(offset)
        offset += len(text) + 1
    whole = "\n".join(pages)
    positions: list[int] = []
    for _level, title, page in entries:
        floor = positions[-1] if positions else 0
        base = max(starts[page], floor)
        end = starts[page] + len(pages[page])
        found = _find_title(whole, title, base, end) if base <= end else None
        positions.append(max(found if found is not None else starts[page], floor))
    sections = [Section(0, OPENING, whole[: positions[0]], 1)]
    for n, (level, title, page) in enumerate(entries):
        stop = positions[n + 1] if n + 1 < len(entries) else len(whole)
        sections.append(Section(level, title, whole[positions[n]:stop], page + 1))
    return sections


def _find_title(text: str, title: str, start: int, end: int) -> int | None:
    words = title.split()[:8]
    if not words:
        return None
    pattern = re.compile(r"\s*".join(re.escape(w) for w in words), re.IGNORECASE)
    found = pattern.search(text, start, end)
    return found.start() if found else None


# -- DOCX -----------------------------------------------------------------------------

_DOCX_HEADING = re.compile(r"^heading\s*([1-9])$", re.IGNORECASE)


def read_docx(data: bytes, stem: str) -> Outline:
    """Paragraphs in 'Heading N' styles open sections; tables are kept as rows
    of cells separated by ' | '."""
    import docx
    from docx.enum.style import WD_STYLE_TYPE
    from docx.table import Table

    document = docx.Document(io.BytesIO(data))
    title = (document.core_properties.title or "").strip()
    # `paragraph.style` searches the style part on every call, the default
    # style's search being the slowest (a tenth of a second for a short
    # document); each style ID met is looked up once, and none means the
    # default style, never a heading.
    names: dict[str, str] = {}

    def style_name(style_id: str | None) -> str:
        if style_id is None:
            return ""
        if style_id not in names:
            found = document.part.get_style(style_id, WD_STYLE_TYPE.PARAGRAPH)
            names[style_id] = found.name or ""
        return names[style_id]

    builder = _Sections()
    for block in document.iter_inner_content():
        if isinstance(block, Table):
            for row in block.rows:
                builder.add(" | ".join(c.text.strip() for c in row.cells))
            continue
        style = style_name(block._p.style)  # the paragraph's style ID (python-docx's CT_P)
        heading = _DOCX_HEADING.match(style)
        if style == "Title" and not title:
            title = block.text.strip()
        elif heading:
            builder.open(int(heading.group(1)), block.text)
        else:
            builder.add(block.text)
    sections = builder.close()
    return Outline(title or _first_top_heading(sections, stem), tuple(sections))


# -- ODT ------------------------------------------------------------------------------


def read_odt(data: bytes, stem: str) -> Outline:
    """`text:h` elements open sections at their outline level; paragraphs, lists
    and table cells give the text."""
    from odf import dc, teletype
    from odf.namespaces import TEXTNS
    from odf.opendocument import load

    document = load(io.BytesIO(data))
    titles = document.meta.getElementsByType(dc.Title) if document.meta else []
    title = teletype.extractText(titles[0]).strip() if titles else ""
    builder = _Sections()

    def walk(node) -> None:
        for child in node.childNodes:
            qname = getattr(child, "qname", None)
            if qname == (TEXTNS, "h"):
                raw = str(child.attributes.get((TEXTNS, "outline-level"), "1"))
                builder.open(int(raw) if raw.isdigit() else 1, teletype.extractText(child))
            elif qname == (TEXTNS, "p"):
                builder.add(teletype.extractText(child))
            elif qname is not None:  # lists, tables, sections: their paragraphs count
                walk(child)

    walk(document.text)
    sections = builder.close()
    return Outline(title or _first_top_heading(sections, stem), tuple(sections))


Reader = Callable[[bytes, str], Outline]

READERS: dict[str, Reader] = {
    ".md": read_markdown,
    ".markdown": read_markdown,
    ".txt": read_text,
    ".text": read_text,
    ".html": read_html,
    ".htm": read_html,
    ".pdf": read_pdf,
    ".docx": read_docx,
    ".odt": read_odt,
}
