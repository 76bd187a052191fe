"""Reaching the web: `web_search` over a configured backend and
`web_get_content`, a page fetch that never reaches a private address.

`settings` holds the `[web]` section, `addresses` the rules for which
addresses may be reached, `fetch` the guarded HTTP client, `extract` the
text of HTML, PDF and office files, `search` the search backends and
`tools` the two tools the model sees.
"""

from .settings import WebSettings
from .tools import web_status, web_tools

__all__ = ["WebSettings", "web_status", "web_tools"]
