"""Shared helpers for the memory tests: a store, a session, and turns to fill them."""

from __future__ import annotations

from collections.abc import Iterator

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


def save_point_text(ids: list[int], *, journey_words: int = 60, extra: str = "") -> str:
    """A well-formed save point citing `ids` inline, one per sentence."""
    filler = " ".join(["and the conversation went on with care"] * max(1, journey_words // 7))
    sentences = [f"The person and the agent spoke about step {i} {{cite:{i}}}, {filler}." for i in ids]
    return (
        "## State\nThings stand as the Journey tells.\n\n"
        "## The Journey\n" + " ".join(sentences) + extra + "\n"
    )
