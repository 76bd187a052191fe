"""Reaching the web: `web_search` over a configured backend and
`web_get_content`, a page fetch that never reaches a private address.

`settings` holds the `[web]` section, `addresses` the rules for which
addresses may be reached, `fetch` the guarded HTTP client, `extract` the
text of HTML, PDF and office files, `search` the search backends and
`tools` the two tools the model sees (`web_tools`) and their line in
`noema config check` (`web_status`). The exfiltration guard of the fetch
(an address the model composed asks the person) is `exfiltration`, over
`seen` (the addresses the conversation showed) and `urls` (addresses
compared as they are sent).

Only the settings are imported here, so that reading the configuration does
not load the HTTP client and the extractors.
"""

from .settings import WebSettings

__all__ = ["WebSettings"]
