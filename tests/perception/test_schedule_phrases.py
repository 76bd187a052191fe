"""Natural-language times and recurrence rules, in English and Spanish, read at
a fixed "now" in Europe/Madrid, across both changes of clocks of 2026
(forward on Sunday 29 March at 02:00, back on Sunday 25 October at 03:00)."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings, strategies as st

from noema.scheduling.phrases import describe, resolve_when
from noema.scheduling.recurrence import missed_between, next_after, occurrences, parse_rule
from noema.scheduling.words import PhraseError

MADRID = ZoneInfo("Europe/Madrid")
# Friday 27 March 2026, 15:30 CET: the clocks jump forward on Sunday.
NOW = datetime(2026, 3, 27, 15, 30, tzinfo=MADRID)
# Saturday 24 October 2026, 22:00 CEST: the clocks go back tonight.
AUTUMN = datetime(2026, 10, 24, 22, 0, tzinfo=MADRID)

PHRASES = [
    # English
    ("in 20 minutes", NOW, "2026-03-27T15:50:00+01:00"),
    ("in an hour", NOW, "2026-03-27T16:30:00+01:00"),
    ("in half an hour", NOW, "2026-03-27T16:00:00+01:00"),
    ("in an hour and a half", NOW, "2026-03-27T17:00:00+01:00"),
    ("in 1h30m", NOW, "2026-03-27T17:00:00+01:00"),
    ("tomorrow at 9", NOW, "2026-03-28T09:00:00+01:00"),
    ("tomorrow morning", NOW, "2026-03-28T09:00:00+01:00"),
    ("at 9", NOW, "2026-03-28T09:00:00+01:00"),  # passed today: tomorrow
    ("at 5 pm", NOW, "2026-03-27T17:00:00+01:00"),
    ("at 17:45", NOW, "2026-03-27T17:45:00+01:00"),
    ("tonight", NOW, "2026-03-27T21:00:00+01:00"),
    ("this evening", NOW, "2026-03-27T19:00:00+01:00"),
    ("monday 8:30", NOW, "2026-03-30T08:30:00+02:00"),
    ("next friday at 5pm", NOW, "2026-04-03T17:00:00+02:00"),
    ("friday", NOW, "2026-04-03T09:00:00+02:00"),  # today is Friday: a week away
    ("on saturday afternoon", NOW, "2026-03-28T16:00:00+01:00"),
    ("the day after tomorrow at noon", NOW, "2026-03-29T12:00:00+02:00"),
    ("december 3 at 10:00", NOW, "2026-12-03T10:00:00+01:00"),
    ("3rd of january", NOW, "2027-01-03T09:00:00+01:00"),  # passed this year: next year
    ("in 2 days", NOW, "2026-03-29T15:30:00+02:00"),  # days keep the wall time
    ("in 48 hours", NOW, "2026-03-29T16:30:00+02:00"),  # hours are elapsed time
    ("sunday at 2:30", NOW, "2026-03-29T03:30:00+02:00"),  # skipped: moved by the jump
    ("2026-03-29T02:30", NOW, "2026-03-29T03:30:00+02:00"),
    ("2026-04-01T10:00:00Z", NOW, "2026-04-01T12:00:00+02:00"),
    ("tomorrow at 2:30", AUTUMN, "2026-10-25T02:30:00+02:00"),  # twice: the first
    ("in 3 hours", AUTUMN, "2026-10-25T01:00:00+02:00"),
    ("in 5 hours", AUTUMN, "2026-10-25T02:00:00+01:00"),  # the repeated hour counts
    # Spanish
    ("mañana a las 9", NOW, "2026-03-28T09:00:00+01:00"),
    ("manana a las 9", NOW, "2026-03-28T09:00:00+01:00"),
    ("el viernes por la tarde", NOW, "2026-04-03T16:00:00+02:00"),
    ("el lunes a las 8:30", NOW, "2026-03-30T08:30:00+02:00"),
    ("en 10 minutos", NOW, "2026-03-27T15:40:00+01:00"),
    ("dentro de 2 horas", NOW, "2026-03-27T17:30:00+01:00"),
    ("en media hora", NOW, "2026-03-27T16:00:00+01:00"),
    ("en una hora y media", NOW, "2026-03-27T17:00:00+01:00"),
    ("a las 9", NOW, "2026-03-28T09:00:00+01:00"),
    ("a las 5 y media de la tarde", NOW, "2026-03-27T17:30:00+01:00"),
    ("a las 9 menos cuarto de la noche", NOW, "2026-03-27T20:45:00+01:00"),
    ("esta noche", NOW, "2026-03-27T21:00:00+01:00"),
    ("mañana por la mañana", NOW, "2026-03-28T09:00:00+01:00"),
    ("pasado mañana a las 7", NOW, "2026-03-29T07:00:00+02:00"),
    ("el próximo miércoles a mediodía", NOW, "2026-04-01T12:00:00+02:00"),
    ("el sábado a la 1 de la tarde", NOW, "2026-03-28T13:00:00+01:00"),
    ("3 de diciembre a las 10", NOW, "2026-12-03T10:00:00+01:00"),
    ("el 15 de abril de 2027", NOW, "2027-04-15T09:00:00+02:00"),
    ("el domingo a las 2:30", NOW, "2026-03-29T03:30:00+02:00"),
    ("mañana a las 2 y media", AUTUMN, "2026-10-25T02:30:00+02:00"),
    ("en 1 semana", NOW, "2026-04-03T15:30:00+02:00"),
    # numbers in words
    ("a las nueve de la noche", NOW, "2026-03-27T21:00:00+01:00"),
    ("mañana a las once", NOW, "2026-03-28T11:00:00+01:00"),
    ("a la una y media", NOW, "2026-03-28T01:30:00+01:00"),  # a bare hour: 24-hour clock
    ("a la una y media de la tarde", NOW, "2026-03-28T13:30:00+01:00"),
    ("en dos horas", NOW, "2026-03-27T17:30:00+01:00"),
    ("in ten minutes", NOW, "2026-03-27T15:40:00+01:00"),
    ("tomorrow at seven pm", NOW, "2026-03-28T19:00:00+01:00"),
]


@pytest.mark.parametrize(("phrase", "now", "expected"), PHRASES,
                         ids=[p for p, _, _ in PHRASES])
def test_phrase_resolves_to_the_expected_time(phrase: str, now: datetime, expected: str) -> None:
    resolved = resolve_when(phrase, now)
    assert resolved.at.isoformat() == expected
    assert resolved.at.tzinfo is MADRID  # echoed in the agent's zone


def test_the_table_has_enough_phrases_in_both_languages() -> None:
    assert len(PHRASES) >= 30
    spanish = [p for p, _, _ in PHRASES if any(w in p for w in ("las", "mañana", "en ", "el "))]
    assert len(spanish) >= 15


def test_assumptions_are_said_in_the_notes() -> None:
    skipped = resolve_when("el domingo a las 2:30", NOW)
    assert any("does not exist" in n and "03:30" in n for n in skipped.notes)
    twice = resolve_when("tomorrow at 2:30", AUTUMN)
    assert any("happens twice" in n and "CEST" in n for n in twice.notes)
    friday = resolve_when("el viernes", NOW)
    assert any("a week from today" in n for n in friday.notes)
    assert any("09:00 is assumed" in n for n in friday.notes)
    passed = resolve_when("at 9", NOW)
    assert any("tomorrow" in n for n in passed.notes)
    assert resolve_when("in 20 minutes", NOW).notes == ()


def test_the_echo_names_weekday_date_time_and_zone() -> None:
    at = resolve_when("el viernes por la tarde", NOW).at
    assert describe(at) == "Friday 3 April 2026, 16:00 CEST (UTC+02:00)"


@pytest.mark.parametrize("phrase", [
    "", "someday", "blah at 9", "today at 8", "hoy a las 8", "2026-01-01T10:00",
    "in 20 minutes tomorrow", "at 25:00", "3 december 9999", "in 11 years", "at 13pm", "february 30", "tonight tomorrow",
    "2026-13-01", "at once",
])
def test_unreadable_or_past_phrases_are_refused_with_advice(phrase: str) -> None:
    with pytest.raises(PhraseError) as caught:
        resolve_when(phrase, NOW)
    assert str(caught.value)


def test_a_naive_now_is_a_bug_of_ours() -> None:
    with pytest.raises(ValueError):
        resolve_when("in 5 minutes", NOW.replace(tzinfo=None))


# -- recurrence rules ---------------------------------------------------------

RULES = [
    ("every weekday at 8:30", "30 8 * * 1-5"),
    ("cada lunes a las 10", "0 10 * * 1"),
    ("every day at 9", "0 9 * * *"),
    ("cada día a las 8", "0 8 * * *"),
    ("todos los días laborables a las 8", "0 8 * * 1-5"),
    ("cada día laborable por la mañana", "0 9 * * 1-5"),
    ("de lunes a viernes a las 7", "0 7 * * 1-5"),
    ("los fines de semana a las 11", "0 11 * * 0,6"),
    ("mondays and thursdays at 18:00", "0 18 * * 1,4"),
    ("los martes y jueves por la tarde", "0 16 * * 2,4"),
    ("cada viernes a las 5 de la tarde", "0 17 * * 5"),
    ("every month on the 1st at 9", "0 9 1 * *"),
    ("el día 15 de cada mes a las 12", "0 12 15 * *"),
    ("every 15 minutes", "*/15 * * * *"),
    ("cada hora", "0 * * * *"),
    ("cada media hora", "*/30 * * * *"),
    ("every sunday", "0 9 * * 0"),
    ("friday to monday at 7", "0 7 * * 5-6,0-1"),
    ("every monday to sunday at 9", "0 9 * * 1-6,0"),
    ("every 60 minutes", "0 * * * *"),
    ("cada diez minutos", "*/10 * * * *"),
    ("todos los días a las once", "0 11 * * *"),
    ("30 8 * * 1-5", "30 8 * * 1-5"),
]


@pytest.mark.parametrize(("rule", "cron"), RULES, ids=[r for r, _ in RULES])
def test_rule_reads_as_cron(rule: str, cron: str) -> None:
    assert parse_rule(rule, NOW).cron == cron


@pytest.mark.parametrize("rule", ["sometimes", "every 7 minutes", "every 5 hours", "0 0 31 2 *",
                                  "at 9", "el día 31 de cada mes", "",
                                  "every 2 days on mondays", "every 2 months on monday",
                                  "every 2 weeks on the 15th", "every 400 days",
                                  "every other weekday", "every 0 weeks"])
def test_unreadable_rules_are_refused(rule: str) -> None:
    with pytest.raises(PhraseError):
        parse_rule(rule, NOW)


def _local(ts: float) -> str:
    return datetime.fromtimestamp(ts, MADRID).isoformat()


def test_a_daily_rule_in_the_skipped_hour_fires_once_after_the_jump() -> None:
    start = datetime(2026, 3, 28, 12, tzinfo=MADRID).timestamp()
    fires = occurrences("30 2 * * *", MADRID, start)
    assert [_local(next(fires)) for _ in range(2)] == [
        "2026-03-29T03:00:00+02:00", "2026-03-30T02:30:00+02:00"]


def test_a_daily_rule_in_the_repeated_hour_fires_once() -> None:
    start = datetime(2026, 10, 24, 12, tzinfo=MADRID).timestamp()
    fires = occurrences("30 2 * * *", MADRID, start)
    assert [_local(next(fires)) for _ in range(2)] == [
        "2026-10-25T02:30:00+02:00", "2026-10-26T02:30:00+01:00"]
    # Starting between the two 02:30s does not fire the second one.
    between = datetime(2026, 10, 25, 2, 45, tzinfo=MADRID).timestamp()
    assert _local(next_after("30 2 * * *", MADRID, between)) == "2026-10-26T02:30:00+01:00"


def test_an_hourly_rule_follows_real_time_through_both_changes() -> None:
    spring = datetime(2026, 3, 29, 0, 30, tzinfo=MADRID).timestamp()
    fires = list(_take(occurrences("0 * * * *", MADRID, spring), 4))
    assert [b - a for a, b in zip(fires, fires[1:])] == [3600.0] * 3
    autumn = datetime(2026, 10, 25, 0, 30, tzinfo=MADRID).timestamp()
    fires = list(_take(occurrences("0 * * * *", MADRID, autumn), 5))
    assert [b - a for a, b in zip(fires, fires[1:])] == [3600.0] * 4


def _take(iterator, n):
    for _, item in zip(range(n), iterator):
        yield item


def test_missed_firings_are_counted_with_the_first_and_last() -> None:
    after = datetime(2026, 3, 23, 0, 0, tzinfo=MADRID).timestamp()  # a Monday
    until = datetime(2026, 3, 27, 15, 30, tzinfo=MADRID).timestamp()
    missed = missed_between("30 8 * * 1-5", MADRID, after, until)
    assert missed is not None and missed.count == 5 and not missed.capped
    assert _local(missed.first) == "2026-03-23T08:30:00+01:00"
    assert _local(missed.last) == "2026-03-27T08:30:00+01:00"
    assert missed_between("30 8 * * 1-5", MADRID, missed.last, until) is None


def test_counting_stops_at_the_cap_but_finds_the_true_last() -> None:
    after = datetime(2026, 1, 1, tzinfo=MADRID).timestamp()
    until = after + 30 * 86400 + 17
    missed = missed_between("* * * * *", MADRID, after, until, cap=100)
    assert missed is not None and missed.count == 100 and missed.capped
    assert missed.last == after + 30 * 86400


# -- properties: fire times strictly increase, none skipped or doubled across DST --

_HOURS = st.integers(0, 23)
_MINUTES = st.sampled_from([0, 15, 30, 45, 59])
_DAYS = st.sampled_from(["*", "1-5", "0,6", "1", "0"])
_STARTS = st.datetimes(min_value=datetime(2026, 3, 20), max_value=datetime(2026, 11, 5))


@settings(max_examples=60, deadline=None)  # no timing limit: the machine is shared
@given(hour=_HOURS, minute=_MINUTES, days=_DAYS, start=_STARTS)
def test_daily_rules_fire_once_per_matching_day_in_increasing_order(
        hour: int, minute: int, days: str, start: datetime) -> None:
    cron = f"{minute} {hour} * * {days}"
    begin = start.replace(tzinfo=MADRID).timestamp()
    fires = list(_take(occurrences(cron, MADRID, begin), 40))
    assert all(a < b for a, b in zip(fires, fires[1:]))
    assert fires[0] > begin
    local_days = [datetime.fromtimestamp(f, MADRID).date() for f in fires]
    assert len(set(local_days)) == len(local_days)  # never twice on one day
    # No matching day is skipped between the first and the last firing.
    allowed = _cron_days(days)
    day, expected = local_days[0], []
    while day <= local_days[-1]:
        if (day.isoweekday() % 7) in allowed:
            expected.append(day)
        day += timedelta(days=1)
    assert local_days == expected
    for fire in fires:  # on time, or at the first minute after a skipped wall time
        moment = datetime.fromtimestamp(fire, MADRID)
        wall = (moment.hour, moment.minute)
        assert wall == (hour, minute) or (wall == (3, 0) and hour == 2)


def _cron_days(days: str) -> set[int]:
    named = {"*": set(range(7)), "1-5": {1, 2, 3, 4, 5}, "0,6": {0, 6}}
    return named[days] if days in named else {int(days)}


@settings(max_examples=40, deadline=None)  # no timing limit: the machine is shared
@given(step=st.sampled_from([1, 5, 15, 30, 60]), start=_STARTS)
def test_interval_rules_keep_real_time_steps(step: int, start: datetime) -> None:
    cron = "0 * * * *" if step == 60 else f"*/{step} * * * *"
    begin = start.replace(tzinfo=MADRID).timestamp()
    fires = list(_take(occurrences(cron, MADRID, begin), 150))
    gaps = {b - a for a, b in zip(fires, fires[1:])}
    assert gaps == {step * 60.0}


# -- properties: any text is read or refused in words, never a crash ----------------

_WORDS = st.sampled_from([
    "in", "en", "at", "a", "las", "la", "de", "the", "tomorrow", "mañana", "pasado", "hoy",
    "friday", "viernes", "next", "el", "próximo", "morning", "tarde", "noche", "tonight",
    "noon", "mediodía", "december", "diciembre", "3", "9", "12", "25", "99", "0", "2026",
    "99999999999999", "minutes", "horas", "días", "weeks", "half", "an", "media", "y",
    "cuarto", "menos", "pm", "am", "17:30", "2:30", "24:00", "1h30m", "every", "cada",
    "lunes", "weekday", "laborables", "to", "*", "*/7", "1-5", "hour", "month", "día",
    "other", "third", "semanas", "weeks", "months", "meses", "primer", "último", "last",
    "alternos", "sí", "no", "otro", "un", "fortnightly", "of", "cada", "dos", "400", "1st",
])
_PHRASES = st.one_of(st.lists(_WORDS, max_size=7).map(" ".join), st.text(max_size=40))


@settings(max_examples=300, deadline=None)  # no timing limit: the machine is shared
@given(phrase=_PHRASES)
def test_any_when_is_a_future_time_or_a_phrase_error(phrase: str) -> None:
    try:
        resolved = resolve_when(phrase, NOW)
    except PhraseError as exc:
        assert str(exc)
    else:
        assert resolved.at > NOW and resolved.at.tzinfo is MADRID


@settings(max_examples=300, deadline=None)  # no timing limit: the machine is shared
@given(rule=_PHRASES)
def test_any_rule_is_a_usable_cron_or_a_phrase_error(rule: str) -> None:
    try:
        recurrence = parse_rule(rule, NOW)
    except PhraseError as exc:
        assert str(exc)
    else:
        assert next_after(recurrence.cron, MADRID, NOW.timestamp()) > NOW.timestamp()
