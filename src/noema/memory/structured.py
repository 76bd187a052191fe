"""A save point asked for as structured data, and rendered into its Markdown.

Where the chronicler's server can hold its answer to a JSON schema, the save
point is asked for as an object: `state`, the State's text, and `journey`,
the Journey's sentences in order, each with the one turn it comes from in
`cite`. The schema allows in `cite` exactly the IDs the validator allows (an
`enum`), so a server that decodes under the schema cannot write an invented
ID. The object is then rendered into the Markdown the rest of the system
reads: the two sections, each citation inline before its sentence's stop.
The validator judges that Markdown like any other.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection

from ..providers.base import AnswerSchema

SCHEMA_NAME = "save_point"
# Sentences per paragraph of the rendered Journey.
PARAGRAPH_SENTENCES = 4
# The longest sentence and State the schema allows, in characters, so that
# a small model cannot spend its whole answer on one run-on string and be
# cut off before the object closes; and what one sentence costs in tokens
# with its JSON around it, to bound their number by the answer's length.
SENTENCE_CHARS = 240
STATE_CHARS = 480
SENTENCE_TOKENS = SENTENCE_CHARS // 4 + 12
# The shortest sentence, and the words a sentence is counted for when the
# Journey must reach a length: a small model held to a schema otherwise
# writes one short sentence and stops, and the validator refuses it as terse.
SENTENCE_MIN_CHARS = 40
WORDS_PER_SENTENCE = 12
_MARKER = re.compile(r"\s*\{\s*cite\s*:[^}]*\}", re.IGNORECASE)
_STOP = re.compile(r"([.!?…]+[\"'”’)\]]*)\s*$")


def save_point_schema(allowed: Collection[int], answer_tokens: int | None = None,
                      min_words: int = 0) -> AnswerSchema:
    """The schema of a save point whose citations can only be `allowed`; given
    `answer_tokens`, one that a complete answer fits in that many tokens; with
    `min_words`, one whose Journey has enough sentences to reach them (as far
    as the answer's length allows)."""
    cite = {"type": "integer", "enum": sorted(set(allowed))}
    state_chars = STATE_CHARS if answer_tokens is None else min(STATE_CHARS, answer_tokens)
    sentence = {
        "type": "object",
        "properties": {"sentence": {"type": "string", "minLength": SENTENCE_MIN_CHARS,
                                    "maxLength": SENTENCE_CHARS}, "cite": cite},
        "required": ["sentence", "cite"],
        "additionalProperties": False,
    }
    journey: dict = {"type": "array", "items": sentence, "minItems": 1}
    if answer_tokens is not None:
        journey["maxItems"] = max((answer_tokens - state_chars // 4 - 16) // SENTENCE_TOKENS, 1)
    wanted = -(-min_words // WORDS_PER_SENTENCE)  # sentences, rounded up
    journey["minItems"] = max(1, min(wanted, journey.get("maxItems", wanted)))
    return AnswerSchema(SCHEMA_NAME, {
        "type": "object",
        "properties": {
            "state": {"type": "string", "maxLength": state_chars},
            "journey": journey,
        },
        "required": ["state", "journey"],
        "additionalProperties": False,
    })


def _cited(sentence: str, cite: int) -> str:
    """The sentence with its citation inline, before its final stop."""
    words = " ".join(_MARKER.sub("", sentence).split())
    if not words:
        return ""
    stop = _STOP.search(words)
    if stop:
        return f"{words[: stop.start()].rstrip()} {{cite:{cite}}}{stop.group(1)}"
    return f"{words} {{cite:{cite}}}."


def render(raw: str, headings: tuple[str, str]) -> str | None:
    """The Markdown of a save point given as structured data, or None when
    `raw` is no such object (not JSON, or not of the schema's shape)."""
    text = raw.strip()
    if text.startswith("```"):  # a fence some servers keep around the object
        text = text.strip("`").removeprefix("json").strip()
    try:
        # strict=False: a small model's grammar may let a raw line break into a string.
        data = json.loads(text, strict=False)
    except (ValueError, RecursionError):
        data = _complete_part(text)
        if data is None:
            return None
    if not isinstance(data, dict) or not isinstance(data.get("journey"), list):
        return None
    state = data.get("state")
    sentences = []
    for item in data["journey"]:
        if not isinstance(item, dict) or not isinstance(item.get("sentence"), str):
            continue
        cite = item.get("cite")
        if isinstance(cite, bool) or not isinstance(cite, int):
            continue
        said = _cited(item["sentence"], cite)
        if said:
            sentences.append(said)
    paragraphs = [" ".join(sentences[i: i + PARAGRAPH_SENTENCES])
                  for i in range(0, len(sentences), PARAGRAPH_SENTENCES)]
    state_text = " ".join(state.split()) if isinstance(state, str) else ""
    return (f"## {headings[0]}\n{state_text}\n\n## {headings[1]}\n"
            + "\n\n".join(paragraphs) + "\n")


def _complete_part(text: str) -> dict | None:
    """The object an answer cut short by its length began: its State and the
    Journey's sentences that were complete (the validator judges the rest)."""
    for end in (m.end() for m in reversed(list(re.finditer(r"\}", text)))):
        try:
            data = json.loads(text[:end] + "]}", strict=False)
        except (ValueError, RecursionError):
            continue
        return data if isinstance(data, dict) else None
    return None


def looks_structured(raw: str) -> bool:
    """Whether an answer at least began as the object asked for (one cut short
    by its length still did): a server that ignored the schema wrote prose."""
    return raw.lstrip().lstrip("`").removeprefix("json").lstrip().startswith("{")
