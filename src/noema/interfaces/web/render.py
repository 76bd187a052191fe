"""Text from the model or the world, made safe to show.

Markdown is rendered by markdown-it-py with raw HTML turned off, then passed
through nh3 (the ammonia sanitiser) with a short allow-list, so whatever a
model or a web page writes comes out as text or as harmless formatting, never
as script, style, frames or event handlers.

A save point is the chronicler's text about the conversation, read by the
person to judge it: its only links are citations to turns of this page
(`/memory/turn/N`); any other link, whatever its spelling, is kept as its
text without an address, so nothing in a save point leaves the page.
"""

from __future__ import annotations

import re
from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

_TAGS = {"p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
         "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
         "del"}
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"},
               "code": {"class"}}
_LANGUAGE = re.compile(r"language-[A-Za-z0-9_+#-]{1,32}")


CITATION_HREF = re.compile(r"/memory/turn/[0-9]{1,12}")


def _language_only(tag: str, attribute: str, value: str) -> str | None:
    """A code block's class names its language ("language-python"), nothing else."""
    if attribute == "class":
        return value if tag == "code" and _LANGUAGE.fullmatch(value) else None
    return value


def _citations_only(tag: str, attribute: str, value: str) -> str | None:
    if tag == "a" and attribute == "href":
        return value if CITATION_HREF.fullmatch(value) else None
    return _language_only(tag, attribute, value)


@lru_cache(maxsize=1024)
def citations_html(text: str) -> str:
    """`text` as sanitised HTML whose only links are citations inside the page."""
    return nh3.clean(_markdown.render(text), tags=_TAGS, attributes=_ATTRIBUTES,
                     url_schemes=set(), attribute_filter=_citations_only, link_rel=None)


def markdown_html_fresh(text: str) -> str:
    """`text` as sanitised HTML (links open outside the page, without referrer),
    not cached: for an answer still being written, whose text changes."""
    return nh3.clean(_markdown.render(text), tags=_TAGS, attributes=_ATTRIBUTES,
                     url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer nofollow",
                     attribute_filter=_language_only)


@lru_cache(maxsize=4096)  # stored turns never change, and a page reload asks again
def markdown_html(text: str) -> str:
    """`text` as sanitised HTML, as `markdown_html_fresh`, cached."""
    return markdown_html_fresh(text)
