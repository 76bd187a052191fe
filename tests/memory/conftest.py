"""Shared helpers for the memory tests: a store, a session, and turns to fill them."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping

import pytest

from noema.memory.session import Session
from noema.memory.store import TurnStore
from noema.memory.turns import NewTurn, Turn, TurnKind


@pytest.fixture
def store(tmp_path) -> Iterator[TurnStore]:
    opened = TurnStore(tmp_path / "turns.db")
    yield opened
    opened.close()


@pytest.fixture
def session(store: TurnStore) -> Session:
    return Session.load(store)


def chat(session: Session, exchanges: int, topic: str = "the garden") -> list[Turn]:
    """Alternating user and assistant turns about a topic."""
    added = []
    for n in range(exchanges):
        added.append(session.append(NewTurn(TurnKind.USER, f"question {n} about {topic} and its soil")))
        added.append(session.append(NewTurn(
            TurnKind.ASSISTANT, f"answer {n}: {topic} needs compost, water and patience")))
    return added


def tool_round(session: Session, name: str, result: str, call_id: str) -> tuple[Turn, Turn]:
    """A tool call and its result, appended to the session."""
    call = session.append(NewTurn(TurnKind.TOOL_CALL, tool_name=name, call_id=call_id,
                                  arguments='{"q": "x"}'))
    done = session.append(NewTurn(TurnKind.TOOL_RESULT, result, tool_name=name, call_id=call_id))
    return call, done


def said_in_request(shown: str, words: int = 10) -> dict[int, str]:
    """How each message the chronicler was shown begins (its first `words`
    words), by ID: a reading chronicler retells that much, briefly."""
    found = re.findall(r"^\[(\d+)\] (?:person|agent)[^\n]*?: (.*)$", shown, re.M)
    return {int(n): " ".join(text.split()[:words]).rstrip(".") for n, text in found}


def said_in(turns: list[Turn]) -> dict[int, str]:
    """What each turn said, its ID as key: a chronicle that retells it is supported."""
    return {t.id: t.content.rstrip(".") for t in turns}


def save_point_text(ids: list[int], *, journey_words: int = 60, extra: str = "",
                    said: Mapping[int, str] | None = None) -> str:
    """A well-formed save point citing `ids` inline, one per sentence, each
    sentence retelling what its turn said (`said`, by ID) when it is given."""
    filler = " ".join(["and the conversation went on with care"] * max(1, journey_words // 7))
    told = said or {}
    sentences = [f"The person and the agent spoke about {told.get(i, f'step {i}')} {{cite:{i}}}, "
                 f"{filler}." for i in ids]
    return (
        "## State\nThings stand as the Journey tells.\n\n"
        "## The Journey\n" + " ".join(sentences) + extra + "\n"
    )
