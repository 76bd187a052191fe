"""`noema schedule`: the person lists and cancels the agent's schedules."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from click.testing import CliRunner

from noema.cli import cli
from noema.interfaces.commands.schedule import ScheduleCommandError, cancel_schedule, list_schedules
from noema.paths import AgentPaths
from noema.perception.events import Urgency
from noema.scheduling.store import ScheduleStore, schedules_path

MADRID = "Europe/Madrid"
NOW = datetime(2026, 3, 27, 15, 30, tzinfo=ZoneInfo(MADRID)).timestamp()


@pytest.fixture
def paths(tmp_path: Path) -> AgentPaths:
    return AgentPaths.for_agent("default", tmp_path).ensure()


def keep(paths: AgentPaths) -> None:
    with ScheduleStore(schedules_path(paths)) as store:
        store.add_alarm("call mum", NOW + 1200, rule="in 20 minutes", zone=MADRID, now=NOW)
        store.add_recurring("stand-up", "30 8 * * 1-5", rule="every weekday at 8:30",
                            zone=MADRID, urgency=Urgency.URGENT, now=NOW)


def test_an_agent_without_schedules_says_so_and_creates_nothing(paths: AgentPaths) -> None:
    assert list_schedules(paths, now=NOW) == "No schedules."
    assert not schedules_path(paths).exists()
    with pytest.raises(ScheduleCommandError, match="no schedule #1"):
        cancel_schedule(paths, 1, now=NOW)


def test_list_shows_ids_next_times_and_reasons(paths: AgentPaths) -> None:
    keep(paths)
    lines = list_schedules(paths, now=NOW).splitlines()
    assert lines == [
        "#1 alarm ('in 20 minutes'): next Friday 27 March 2026, 15:50 CET (UTC+01:00), "
        "in 20 min — call mum",
        "#2 recurring 'every weekday at 8:30' (cron 30 8 * * 1-5): next Monday 30 March 2026, "
        "08:30 CEST (UTC+02:00), in 2 d 16 h [urgent] — stand-up",
    ]


def test_cancel_ends_a_schedule_once_and_list_can_show_ended_ones(paths: AgentPaths) -> None:
    keep(paths)
    done = cancel_schedule(paths, 1, now=NOW + 60)
    assert done.startswith("Cancelled: #1 alarm ('in 20 minutes'): cancelled Friday 27 March")
    assert cancel_schedule(paths, 1, now=NOW + 120).startswith("Nothing to cancel: #1")
    assert [line[:2] for line in list_schedules(paths, now=NOW).splitlines()] == ["#2"]
    everything = list_schedules(paths, now=NOW + 120, include_ended=True).splitlines()
    assert [line[:2] for line in everything] == ["#2", "#1"]
    with pytest.raises(ScheduleCommandError, match="no schedule #7"):
        cancel_schedule(paths, 7, now=NOW)


def test_the_noema_schedule_command_lists_and_cancels(paths: AgentPaths) -> None:
    keep(paths)
    runner = CliRunner()
    home = ["--home", str(paths.agents_dir.parent)]
    listed = runner.invoke(cli, [*home, "schedule"])
    assert listed.exit_code == 0, listed.output
    assert [line[:12] for line in listed.output.splitlines()] == ["#1 alarm ('i", "#2 recurring"]
    done = runner.invoke(cli, [*home, "schedule", "cancel", "1"])
    assert done.exit_code == 0 and done.output.startswith("Cancelled: #1 alarm")
    missing = runner.invoke(cli, [*home, "schedule", "cancel", "9"])
    assert missing.exit_code == 1 and "there is no schedule #9" in missing.output
    assert runner.invoke(cli, [*home, "schedule", "list"]).output.startswith("#2 recurring")
    everything = runner.invoke(cli, [*home, "schedule", "list", "--all"]).output
    assert [line[:2] for line in everything.splitlines()] == ["#2", "#1"]
