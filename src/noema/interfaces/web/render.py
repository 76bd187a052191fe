"""Text from the model or the world, made safe to show.

Markdown is rendered by markdown-it-py with raw HTML turned off, then passed
through nh3 (the ammonia sanitiser) with a short allow-list, so whatever a
model or a web page writes comes out as text or as harmless formatting, never
as script, style, frames or event handlers.
"""

from __future__ import annotations

from functools import lru_cache

import nh3
from markdown_it import MarkdownIt

_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

_TAGS = {"p", "br", "hr", "em", "strong", "code", "pre", "blockquote", "ul", "ol", "li",
         "h1", "h2", "h3", "h4", "h5", "h6", "a", "table", "thead", "tbody", "tr", "th", "td",
         "del"}
_ATTRIBUTES = {"a": {"href", "title"}, "ol": {"start"}, "th": {"align"}, "td": {"align"}}


@lru_cache(maxsize=4096)  # stored turns never change, and a page reload asks again
def markdown_html(text: str) -> str:
    """`text` as sanitised HTML (links open outside the page, without referrer)."""
    return nh3.clean(_markdown.render(text), tags=_TAGS, attributes=_ATTRIBUTES,
                     url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer nofollow")
