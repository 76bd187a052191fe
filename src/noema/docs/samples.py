"""Real documents in every format the library reads, written from plain
sections: for the demo, the tests and the benchmark.

Each writer takes a title and `(level, heading, paragraphs)` sections and
writes a file a word processor or PDF viewer opens: Markdown, text, HTML,
DOCX (python-docx), ODT (odfpy) and PDF (pypdf: one page per section, with
an outline entry per heading unless `outline=False`).
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path

SampleSection = tuple[int, str, Sequence[str]]  # level, heading, paragraphs


def write_markdown(path: Path, title: str, sections: Sequence[SampleSection]) -> Path:
    lines = [f"# {title}", ""]
    for level, heading, paragraphs in sections:
        lines += [f"{'#' * (level + 1)} {heading}", "", *(p + "\n" for p in paragraphs)]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path


def write_text(path: Path, title: str, sections: Sequence[SampleSection]) -> Path:
    body = [title, ""] + [p for _l, _h, paragraphs in sections for p in (*paragraphs, "")]
    path.write_text("\n".join(body), encoding="utf-8")
    return path


def write_html(path: Path, title: str, sections: Sequence[SampleSection]) -> Path:
    parts = [f"<html><head><title>{html.escape(title)}</title>"
             "<script>var hidden = 'never indexed';</script></head><body>"]
    for level, heading, paragraphs in sections:
        tag = f"h{min(level + 1, 6)}"
        parts.append(f"<{tag}>{html.escape(heading)}</{tag}>")
        parts += [f"<p>{html.escape(p)}</p>" for p in paragraphs]
    parts.append("</body></html>")
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def write_docx(path: Path, title: str, sections: Sequence[SampleSection]) -> Path:
    import docx

    document = docx.Document()
    document.core_properties.title = title
    for level, heading, paragraphs in sections:
        document.add_heading(heading, level=min(level, 9))
        for paragraph in paragraphs:
            document.add_paragraph(paragraph)
    document.save(str(path))
    return path


def write_odt(path: Path, title: str, sections: Sequence[SampleSection]) -> Path:
    from odf import dc, text
    from odf.opendocument import OpenDocumentText

    document = OpenDocumentText()
    document.meta.addElement(dc.Title(text=title))
    for level, heading, paragraphs in sections:
        document.text.addElement(text.H(outlinelevel=level, text=heading))
        for paragraph in paragraphs:
            document.text.addElement(text.P(text=paragraph))
    document.save(str(path))
    return path


def _pdf_string(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def write_pdf(
    path: Path, title: str, sections: Sequence[SampleSection], *, outline: bool = True
) -> Path:
    """One page per section, the heading at the top, Helvetica, ASCII text."""
    import pypdf
    from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

    writer = pypdf.PdfWriter()
    font = DictionaryObject({
        NameObject("/Type"): NameObject("/Font"),
        NameObject("/Subtype"): NameObject("/Type1"),
        NameObject("/BaseFont"): NameObject("/Helvetica"),
    })
    parents: dict[int, object] = {}
    for number, (level, heading, paragraphs) in enumerate(sections):
        page = writer.add_blank_page(612, 792)
        lines = [heading, *(line for p in paragraphs for line in _wrap(p, 90))]
        ops = ["BT", "/F1 11 Tf", "14 TL", "72 740 Td"]
        ops += [f"({_pdf_string(line)}) Tj T*" for line in lines[:48]]
        ops.append("ET")
        stream = DecodedStreamObject()
        stream.set_data("\n".join(ops).encode("latin-1", "replace"))
        page[NameObject("/Resources")] = DictionaryObject({
            NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})})
        page.replace_contents(stream)
        if outline:
            item = writer.add_outline_item(
                title=heading, page_number=number, parent=parents.get(level - 1))
            parents[level] = item
    writer.add_metadata({"/Title": title})
    with path.open("wb") as out:
        writer.write(out)
    return path


def _wrap(paragraph: str, width: int) -> list[str]:
    lines, current = [], ""
    for word in paragraph.split():
        if current and len(current) + 1 + len(word) > width:
            lines.append(current)
            current = word
        else:
            current = f"{current} {word}" if current else word
    return [*lines, current] if current else lines


WRITERS = {
    ".md": write_markdown,
    ".txt": write_text,
    ".html": write_html,
    ".docx": write_docx,
    ".odt": write_odt,
    ".pdf": write_pdf,
}
