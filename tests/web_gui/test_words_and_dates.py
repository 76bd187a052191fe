"""What the pages call things and how they write times, without a browser:
one date format in the person's zone, the unnamed agent called Noema, tools
by what they do, search snippets as text."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from hypothesis import given, strategies as st
from jinja2 import Environment, FileSystemLoader, select_autoescape

from noema.interfaces.web.context import spoken_name
from noema.interfaces.web.dates import when_html, when_text
from noema.interfaces.web.memory import snippet_html
from noema.interfaces.web.routes import HERE
from noema.interfaces.web.words import tool_name


def test_a_time_is_written_one_way_in_the_person_s_zone():
    assert when_text(0, ZoneInfo("Asia/Tokyo")) == "1 Jan 1970, 09:00"
    assert when_text(0, ZoneInfo("America/New_York")) == "31 Dec 1969, 19:00"
    assert str(when_html(0, ZoneInfo("Asia/Tokyo"))) == \
        '<time datetime="1970-01-01T09:00:00+09:00">1 Jan 1970, 09:00</time>'


def test_the_agent_nobody_named_greets_as_noema():
    environment = Environment(loader=FileSystemLoader(HERE / "templates"),
                              autoescape=select_autoescape(default=True))
    environment.filters["when"] = lambda ts: when_html(ts, None)
    shown = environment.get_template("chat.html").render(
        agent=spoken_name("default"), named=False, page="chat", csrf="x", history=[], status=None)
    assert "Hello, this is Noema" in shown and "default" not in shown
    assert '<strong class="brand">Noema</strong>' in shown
    assert spoken_name("ana") == "ana"


def test_a_tool_is_named_by_what_it_does():
    assert tool_name("shell_execute") == "Run a command"
    assert tool_name("email_send") == "Send a mail"
    assert tool_name("mcp_weather_get") == "mcp_weather_get"  # a server's own tool keeps its name


@given(st.text(alphabet="ab *_`|#>-«»<&\n", max_size=60))
def test_a_snippet_is_text_whatever_it_holds(snippet):
    shown = str(snippet_html(snippet))
    assert "<" not in shown.replace("<mark>", "").replace("</mark>", "")
    assert "«" not in shown and "»" not in shown and "**" not in shown and "`" not in shown
    assert "|" not in shown


def test_a_version_s_summary_says_its_tool_in_words():
    from noema.interfaces.web.words import summary_words

    assert summary_words("file_write notes.txt") == "Write a file: notes.txt"
    assert summary_words("Restore of notes.txt to 6b55b476 (noema restore)") == \
        "Restored notes.txt as an earlier version had it"
    assert summary_words("Initial state of the workspace") == "Initial state of the workspace"


def test_a_code_block_keeps_its_language_and_no_other_class():
    from noema.interfaces.web.render import citations_html, markdown_html_fresh

    shown = markdown_html_fresh("```python\nprint(1)\n```")
    assert '<code class="language-python">' in shown
    odd = markdown_html_fresh('```py" onclick="x\nprint(1)\n```')
    assert "<code>print(1)" in odd and "onclick" not in odd  # no language name: no class
    assert '<code class="language-python">' in citations_html("```python\nprint(1)\n```")
