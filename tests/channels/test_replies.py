"""Which answer goes back to which channel."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from noema.channels.replies import ReplyRouter, answered_pairs
from noema.memory.store import TurnStore
from noema.memory.turns import Flag, NewTurn, Turn, TurnKind
from noema.interfaces.host.protocol import ChannelView

_ROLE = {TurnKind.USER: "user", TurnKind.ASSISTANT: "assistant", TurnKind.TOOL_CALL: "assistant"}


class Turns:
    """Builds consecutive turns as the store would hold them."""

    def __init__(self) -> None:
        self.turns: list[Turn] = []

    def add(self, kind: TurnKind, content: str = "", *, channel: str | None = None,
            cycle: int | None = None, flags: Flag = Flag.NONE) -> Turn:
        from noema.memory.turns import ROLE_OF_KIND

        turn = Turn(len(self.turns) + 1, 0.0, kind, ROLE_OF_KIND[kind], content,
                    channel=channel, cycle_id=cycle, flags=flags,
                    tool_name="t" if kind is TurnKind.TOOL_CALL else None)
        self.turns.append(turn)
        return turn


def test_the_first_answer_after_a_mail_goes_back_by_mail() -> None:
    t = Turns()
    question = t.add(TurnKind.USER, "the report?", channel="email")
    t.add(TurnKind.ASSISTANT, "let me look", cycle=1)
    t.add(TurnKind.TOOL_CALL, cycle=1)
    answer = t.add(TurnKind.ASSISTANT, "here it is", cycle=1)
    t.add(TurnKind.ASSISTANT, "a later thought", cycle=2)  # not owed to anyone
    assert answered_pairs(t.turns, ["email"]) == [(question, answer)]


def test_a_cycle_that_went_on_after_its_text_has_no_answer() -> None:
    t = Turns()
    t.add(TurnKind.USER, "hi", channel="telegram")
    t.add(TurnKind.ASSISTANT, "checking", cycle=1)
    t.add(TurnKind.TOOL_CALL, cycle=1)  # the step limit ended it here
    assert answered_pairs(t.turns, ["telegram"]) == []


def test_discarded_or_interrupted_text_is_never_sent() -> None:
    t = Turns()
    question = t.add(TurnKind.USER, "hi", channel="telegram")
    t.add(TurnKind.ASSISTANT, "half a tho", cycle=1, flags=Flag.INTERRUPTED)
    t.add(TurnKind.ASSISTANT, "discarded", cycle=2, flags=Flag.DISCARDED)
    answer = t.add(TurnKind.ASSISTANT, "the answer", cycle=3)
    assert answered_pairs(t.turns, ["telegram"]) == [(question, answer)]


def test_each_channel_gets_the_answer_to_its_newest_question() -> None:
    t = Turns()
    t.add(TurnKind.USER, "first mail", channel="email")
    second = t.add(TurnKind.USER, "second mail", channel="email")
    chat = t.add(TurnKind.USER, "and on telegram", channel="telegram")
    t.add(TurnKind.USER, "typed", channel="terminal")
    answer = t.add(TurnKind.ASSISTANT, "both answered", cycle=1)
    assert answered_pairs(t.turns, ["email", "telegram"]) == [(second, answer), (chat, answer)]


def test_a_typed_question_is_not_sent_anywhere() -> None:
    t = Turns()
    t.add(TurnKind.USER, "typed", channel="terminal")
    t.add(TurnKind.ASSISTANT, "answer", cycle=1)
    assert answered_pairs(t.turns, ["email"]) == []


_steps = st.lists(st.tuples(
    st.sampled_from(["user:email", "user:terminal", "text", "call", "newcycle"]),
    st.booleans()), max_size=40)


@given(_steps)
def test_pairs_are_a_question_then_a_later_final_answer_each_sent_once(steps) -> None:
    t = Turns()
    cycle = 1
    for step, interrupted in steps:
        if step.startswith("user:"):
            t.add(TurnKind.USER, "q", channel=step[5:])
        elif step == "text":
            t.add(TurnKind.ASSISTANT, "a", cycle=cycle,
                  flags=Flag.INTERRUPTED if interrupted else Flag.NONE)
        elif step == "call":
            t.add(TurnKind.TOOL_CALL, cycle=cycle)
        else:
            cycle += 1
    pairs = answered_pairs(t.turns, ["email"])
    questions = [q.id for q, _ in pairs]
    assert len(questions) == len(set(questions))
    for question, answer in pairs:
        assert question.channel == "email" and question.id < answer.id
        assert answer.kind is TurnKind.ASSISTANT and not answer.has(Flag.INTERRUPTED)
        later = [x for x in t.turns if x.id > answer.id and x.cycle_id == answer.cycle_id]
        assert not any(x.kind is TurnKind.TOOL_CALL for x in later)
        between = [x for x in t.turns if question.id < x.id < answer.id]
        assert not any(x.kind is TurnKind.USER and x.channel == "email" for x in between)


class Recorder:
    name = "email"

    def __init__(self) -> None:
        self.sent: list[tuple[int, int]] = []

    async def reply(self, question: Turn, answer: Turn) -> None:
        self.sent.append((question.id, answer.id))

    def view(self) -> ChannelView:
        return ChannelView(name=self.name, state="connected")


async def test_the_router_hands_each_answer_over_once(tmp_path) -> None:
    store = TurnStore(tmp_path / "turns.db")
    try:
        question = store.append(NewTurn(TurnKind.USER, "report?", channel="email"))
        cycle = store.open_cycle("person")
        answer = store.append(NewTurn(TurnKind.ASSISTANT, "done", cycle_id=cycle))
        channel = Recorder()
        notices: list[str] = []
        router = ReplyRouter(store, {"email": channel}, notices.append)
        router.catch_up()
        router.after_cycle()  # the same answer again: not handed over twice
        await router.aclose()
        assert channel.sent == [(question.id, answer.id)]
        assert notices == []
    finally:
        store.close()


async def test_a_failed_send_is_told_and_does_not_stop_the_router(tmp_path) -> None:
    class Broken(Recorder):
        async def reply(self, question: Turn, answer: Turn) -> None:
            raise ConnectionRefusedError("smtp down")

    store = TurnStore(tmp_path / "turns.db")
    try:
        store.append(NewTurn(TurnKind.USER, "report?", channel="email"))
        cycle = store.open_cycle("person")
        store.append(NewTurn(TurnKind.ASSISTANT, "done", cycle_id=cycle))
        notices: list[str] = []
        router = ReplyRouter(store, {"email": Broken()}, notices.append)
        router.after_cycle()
        await asyncio.sleep(0)
        await router.aclose()
        assert len(notices) == 1 and "smtp down" in notices[0]
    finally:
        store.close()


def test_the_prompt_tells_the_model_where_answers_go(tmp_path) -> None:
    from noema.identity import Identity
    from noema.orchestrator.prompt import build_system_prompt

    identity = Identity(tmp_path / "identity")
    identity.ensure_defaults()
    plain = build_system_prompt(identity, agent_name="ana")
    with_mail = build_system_prompt(identity, agent_name="ana", channels=("email", "telegram"))
    assert "e-mail and Telegram" in with_mail and "same thread" in with_mail
    assert "Where the person writes from" not in plain
