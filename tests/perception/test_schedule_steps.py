"""Recurrences people say that cron cannot ("every two weeks", "cada tres días",
"every other Monday") and the days of a month by their weekday ("el primer lunes
de cada mes", "the last Friday of the month"): read in both languages, kept,
and fired on the days the words mean, across both changes of clocks of 2026."""

from __future__ import annotations

import calendar
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings, strategies as st

from noema.scheduling.firing import due_firing
from noema.scheduling.listing import schedule_line
from noema.scheduling.recurrence import Recurrence, missed_between, occurrences, parse_rule
from noema.scheduling.steps import Step, split
from noema.scheduling.store import Kind, Schedule
from noema.scheduling.words import PhraseError
from noema.perception.events import Urgency

MADRID = ZoneInfo("Europe/Madrid")
# Friday 27 March 2026, 15:30 CET: the clocks jump forward on Sunday.
NOW = datetime(2026, 3, 27, 15, 30, tzinfo=MADRID)


def firings(rule: str, after: datetime, count: int = 3) -> list[str]:
    moments = occurrences(rule, MADRID, after.timestamp())
    return [datetime.fromtimestamp(next(moments), MADRID).isoformat() for _ in range(count)]


# Each phrase, the rule it is kept as, and its first three firings from NOW.
SAID = [
    ("every two weeks", "0 9 * * 6 every 2 weeks from 2026-03-28",
     ["2026-03-28T09:00:00+01:00", "2026-04-11T09:00:00+02:00", "2026-04-25T09:00:00+02:00"]),
    ("cada dos semanas", "0 9 * * 6 every 2 weeks from 2026-03-28",
     ["2026-03-28T09:00:00+01:00", "2026-04-11T09:00:00+02:00", "2026-04-25T09:00:00+02:00"]),
    ("every other day", "0 9 * * * every 2 days from 2026-03-28",
     ["2026-03-28T09:00:00+01:00", "2026-03-30T09:00:00+02:00", "2026-04-01T09:00:00+02:00"]),
    ("día sí, día no a las 8", "0 8 * * * every 2 days from 2026-03-28",
     ["2026-03-28T08:00:00+01:00", "2026-03-30T08:00:00+02:00", "2026-04-01T08:00:00+02:00"]),
    ("el primer lunes de cada mes", "0 9 * * 1#1",
     ["2026-04-06T09:00:00+02:00", "2026-05-04T09:00:00+02:00", "2026-06-01T09:00:00+02:00"]),
    ("the first Monday of every month", "0 9 * * 1#1",
     ["2026-04-06T09:00:00+02:00", "2026-05-04T09:00:00+02:00", "2026-06-01T09:00:00+02:00"]),
    ("every third Friday", "0 9 * * 5 every 3 weeks from 2026-04-03",
     ["2026-04-03T09:00:00+02:00", "2026-04-24T09:00:00+02:00", "2026-05-15T09:00:00+02:00"]),
    ("cada tres días", "0 9 * * * every 3 days from 2026-03-28",
     ["2026-03-28T09:00:00+01:00", "2026-03-31T09:00:00+02:00", "2026-04-03T09:00:00+02:00"]),
    ("every 2 months on the 15th", "0 9 15 * * every 2 months from 2026-04-15",
     ["2026-04-15T09:00:00+02:00", "2026-06-15T09:00:00+02:00", "2026-08-15T09:00:00+02:00"]),
    ("cada dos meses el día 15 a las 12", "0 12 15 * * every 2 months from 2026-04-15",
     ["2026-04-15T12:00:00+02:00", "2026-06-15T12:00:00+02:00", "2026-08-15T12:00:00+02:00"]),
    ("el último viernes de cada mes", "0 9 * * 5L",  # today is March's last, 09:00 has passed
     ["2026-04-24T09:00:00+02:00", "2026-05-29T09:00:00+02:00", "2026-06-26T09:00:00+02:00"]),
    ("the last friday of the month at 18:00", "0 18 * * 5L",
     ["2026-03-27T18:00:00+01:00", "2026-04-24T18:00:00+02:00", "2026-05-29T18:00:00+02:00"]),
    ("el tercer jueves de cada mes por la tarde", "0 16 * * 4#3",
     ["2026-04-16T16:00:00+02:00", "2026-05-21T16:00:00+02:00", "2026-06-18T16:00:00+02:00"]),
    ("the last day of every month", "0 9 L * *",
     ["2026-03-31T09:00:00+02:00", "2026-04-30T09:00:00+02:00", "2026-05-31T09:00:00+02:00"]),
    ("every other monday at 10", "0 10 * * 1 every 2 weeks from 2026-03-30",
     ["2026-03-30T10:00:00+02:00", "2026-04-13T10:00:00+02:00", "2026-04-27T10:00:00+02:00"]),
    ("un lunes sí y otro no a las 10", "0 10 * * 1 every 2 weeks from 2026-03-30",
     ["2026-03-30T10:00:00+02:00", "2026-04-13T10:00:00+02:00", "2026-04-27T10:00:00+02:00"]),
    ("lunes alternos a las 10", "0 10 * * 1 every 2 weeks from 2026-03-30",
     ["2026-03-30T10:00:00+02:00", "2026-04-13T10:00:00+02:00", "2026-04-27T10:00:00+02:00"]),
    ("every 2 weeks on tuesday and thursday at 8:30", "30 8 * * 2,4 every 2 weeks from 2026-03-31",
     ["2026-03-31T08:30:00+02:00", "2026-04-02T08:30:00+02:00", "2026-04-14T08:30:00+02:00"]),
    ("every other month", "0 9 1 * * every 2 months from 2026-04-01",
     ["2026-04-01T09:00:00+02:00", "2026-06-01T09:00:00+02:00", "2026-08-01T09:00:00+02:00"]),
    ("cada semana a las 10", "0 10 * * 6",  # said on a Friday after 10: Saturday first
     ["2026-03-28T10:00:00+01:00", "2026-04-04T10:00:00+02:00", "2026-04-11T10:00:00+02:00"]),
    ("every other weekend at 10", "0 10 * * 0,6 every 2 weeks from 2026-03-28",
     ["2026-03-28T10:00:00+01:00", "2026-03-29T10:00:00+02:00", "2026-04-11T10:00:00+02:00"]),
    ("cada dos fines de semana a las 10", "0 10 * * 0,6 every 2 weeks from 2026-03-28",
     ["2026-03-28T10:00:00+01:00", "2026-03-29T10:00:00+02:00", "2026-04-11T10:00:00+02:00"]),
    ("fortnightly on friday at 17:00", "0 17 * * 5 every 2 weeks from 2026-03-27",
     ["2026-03-27T17:00:00+01:00", "2026-04-10T17:00:00+02:00", "2026-04-24T17:00:00+02:00"]),
]


@pytest.mark.parametrize(("phrase", "rule", "first"), SAID, ids=[p for p, _, _ in SAID])
def test_a_phrase_is_kept_as_its_rule_and_fires_on_the_days_it_means(
        phrase: str, rule: str, first: list[str]) -> None:
    recurrence = parse_rule(phrase, NOW)
    assert recurrence.cron == rule
    assert firings(recurrence.cron, NOW) == first


def test_the_description_says_the_step_and_where_it_is_counted_from() -> None:
    said = parse_rule("cada dos semanas los lunes a las 9", NOW).description
    assert said == "every 2 weeks on Monday at 09:00, counted from Monday 30 March 2026"
    said = parse_rule("el último viernes de cada mes", NOW).description
    assert said == "every month on the last Friday at 09:00"
    said = parse_rule("the fifth friday of every month", NOW).description
    assert said == "every month that has a fifth Friday, on it at 09:00"


def test_a_step_is_counted_from_its_first_firing_not_from_the_calendar() -> None:
    # "*/2" in cron's day field would fire on the 31st and again on the 1st.
    rule = parse_rule("every other day at 9", datetime(2026, 5, 30, 12, tzinfo=MADRID)).cron
    days = [f[:10] for f in firings(rule, datetime(2026, 5, 30, 12, tzinfo=MADRID), 3)]
    assert days == ["2026-05-31", "2026-06-02", "2026-06-04"]


def test_a_stepped_rule_missed_while_stopped_counts_only_its_own_days() -> None:
    rule = parse_rule("every other day at 9", NOW).cron
    until = datetime(2026, 4, 10, 12, tzinfo=MADRID).timestamp()
    missed = missed_between(rule, MADRID, NOW.timestamp(), until)
    # 28, 30 March; 1, 3, 5, 7, 9 April.
    assert missed is not None and missed.count == 7
    assert datetime.fromtimestamp(missed.last, MADRID).date() == date(2026, 4, 9)


def test_a_stored_stepped_schedule_fires_and_lists_by_its_step() -> None:
    recurrence = parse_rule("cada dos semanas los lunes a las 9", NOW)
    schedule = Schedule(id=7, kind=Kind.RECURRING, reason="riego", rule="cada dos semanas",
                        zone="Europe/Madrid", urgency=Urgency.NORMAL,
                        created_at=NOW.timestamp(), cron=recurrence.cron)
    firing = due_firing(schedule, None, datetime(2026, 4, 14, 12, tzinfo=MADRID).timestamp())
    assert firing is not None and firing.count == 2  # 30 March and 13 April, not 6 April
    line = schedule_line(schedule, NOW.timestamp())
    assert "next Monday 30 March 2026, 09:00 CEST" in line


@pytest.mark.parametrize(("stored", "says"), [
    ("0 9 * * 1 every 1 weeks from 2026-03-30", "2 to 52"),
    ("0 9 * * 1 every 2 weeks from 2026-02-30", "is not a date"),
    ("0 9 31 * * every 12 months from 2026-02-01", "never fires"),
    ("0 9 * * 1 every 2 fortnights from 2026-03-30", "cron expression"),
])
def test_a_damaged_stored_rule_is_refused_with_its_reason(stored: str, says: str) -> None:
    with pytest.raises(PhraseError, match=says):
        Recurrence(stored, "x")


def test_the_stored_form_reads_back_as_written() -> None:
    cron, step = split("30 8 * * 2,4 every 2 weeks from 2026-03-31")
    assert cron == "30 8 * * 2,4" and step == Step(2, "week", date(2026, 3, 31))
    assert split("30 8 * * 2,4") == ("30 8 * * 2,4", None)


def test_a_naive_now_is_a_bug_of_ours() -> None:
    with pytest.raises(ValueError, match="aware"):
        parse_rule("every other day", NOW.replace(tzinfo=None))


# -- property: each phrase's firings increase and fall on the days it names ----------

EN_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
ES_DAYS = ("lunes", "martes", "miércoles", "jueves", "viernes", "sábados", "domingos")
EN_ORD = ("last", "first", "second", "third", "fourth")
ES_ORD = ("último", "primer", "segundo", "tercer", "cuarto")
EN_N = {2: ["2", "two", "other"], 3: ["3", "three", "third"], 4: ["4", "four", "fourth"]}
ES_N = {2: ["2", "dos"], 3: ["3", "tres"], 4: ["4", "cuatro"]}


@st.composite
def said_rules(draw):
    """A phrase in English or Spanish, and what it means: (kind, n, weekday, day)."""
    kind = draw(st.sampled_from(["days", "weeks", "weekday", "months", "nth"]))
    spanish = draw(st.booleans())
    n = draw(st.sampled_from([2, 3, 4]))
    weekday = draw(st.integers(0, 6))
    day = draw(st.integers(1, 28))
    nth = draw(st.integers(0, 4))
    hour, minute = draw(st.integers(0, 23)), draw(st.sampled_from([0, 15, 30, 45]))
    count = draw(st.sampled_from(ES_N[n] if spanish else EN_N[n]))
    if kind == "nth":
        n = 1
    if spanish:
        at = f"a las {hour}:{minute:02d}"
        phrase = {
            "days": f"cada {count} días {at}",
            "weeks": f"cada {count} semanas {at}",
            "weekday": f"cada {count} semanas los {ES_DAYS[weekday]} {at}",
            "months": f"cada {count} meses el día {day} {at}",
            "nth": f"el {ES_ORD[nth]} {ES_DAYS[weekday]} de cada mes {at}",
        }[kind]
    else:
        at = f"at {hour}:{minute:02d}"
        unit = {"days": "days", "weeks": "weeks", "months": "months"}.get(kind, "weeks")
        ordinal = count in ("other", "third", "fourth")
        phrase = {
            "days": f"every {count} {'day' if ordinal else unit} {at}",
            "weeks": f"every {count} {'week' if ordinal else unit} {at}",
            "weekday": (f"every {count} {EN_DAYS[weekday]} {at}" if ordinal else
                        f"every {count} weeks on {EN_DAYS[weekday]} {at}"),
            "months": f"every {count} {'month' if ordinal else unit} on the {day}th {at}",
            "nth": f"the {EN_ORD[nth]} {EN_DAYS[weekday]} of every month {at}",
        }[kind]
    return phrase, (kind, n, weekday, day, nth), (hour, minute)


def _months(a: date, b: date) -> int:
    return (b.year - a.year) * 12 + b.month - a.month


@settings(max_examples=150, deadline=None)  # no timing limit: the machine is shared
@given(said=said_rules(),
       now=st.datetimes(min_value=datetime(2026, 1, 1), max_value=datetime(2027, 12, 31)))
def test_each_said_rule_fires_in_order_on_the_days_it_means(said, now: datetime) -> None:
    phrase, (kind, n, weekday, day, nth), (hour, minute) = said
    now = now.replace(tzinfo=MADRID)
    rule = parse_rule(phrase, now).cron
    moments = occurrences(rule, MADRID, now.timestamp())
    fires = [datetime.fromtimestamp(next(moments), MADRID) for _ in range(8)]
    assert all(a < b for a, b in zip(fires, fires[1:])), phrase
    assert fires[0] > now
    for fire in fires:  # on time, or at the first minute after a skipped wall time
        assert (fire.hour, fire.minute) == (hour, minute) or (fire.hour, hour) == (3, 2)
    days = [f.date() for f in fires]
    gaps = {(b - a).days for a, b in zip(days, days[1:])}
    if kind == "days":
        assert gaps == {n}, phrase
    elif kind in ("weeks", "weekday"):
        assert gaps == {7 * n}, phrase
        if kind == "weekday":
            assert {d.weekday() for d in days} == {weekday}, phrase
    elif kind == "months":
        assert {d.day for d in days} == {day}, phrase
        assert {_months(a, b) for a, b in zip(days, days[1:])} == {n}, phrase
    else:
        assert {d.weekday() for d in days} == {weekday}, phrase
        for d in days:
            if nth == 0:  # the last one: a week later is another month
                assert (d + timedelta(days=7)).month != d.month, phrase
            else:
                assert (d.day - 1) // 7 + 1 == nth, phrase
        assert {_months(a, b) for a, b in zip(days, days[1:])} == {1}, phrase
    # Nothing the phrase means was skipped before the first firing: one step back
    # from it is not after `now`... unless that day's firing was earlier than `now`.
    if kind in ("days", "weeks", "weekday", "months"):
        period = {"days": timedelta(days=1), "weeks": timedelta(days=7),
                  "weekday": timedelta(days=7)}.get(kind)
        if period is not None:
            assert fires[0] - period <= now + timedelta(hours=1), phrase
        else:
            assert _months(now.date(), days[0]) <= 1, phrase


def test_the_calendar_helper_agrees_with_the_last_weekday_rule() -> None:
    # The property above checks "last" by a week later falling in another month;
    # the calendar module says the same for the rule's three firings from NOW.
    fires = firings(parse_rule("el último viernes de cada mes", NOW).cron, NOW)
    for fire in fires:
        moment = datetime.fromisoformat(fire)
        weeks = calendar.monthcalendar(moment.year, moment.month)
        fridays = [week[calendar.FRIDAY] for week in weeks if week[calendar.FRIDAY]]
        assert moment.day == fridays[-1]
