"""The model's perception tools, called through the tool registry."""

from __future__ import annotations

import json

import pytest

from noema.perception.archive import SensoryArchive
from noema.perception.clock import ManualClock
from noema.perception.packing import render_pool_event
from noema.perception.pipeline import Pipeline
from noema.perception.tools import perception_tools
from noema.perception.untrusted import SessionDelimiter
from noema.providers.base import ToolCall
from noema.tools.registry import ToolContext, ToolRegistry

from .conftest import CATALOGUE, T0, event

D = SessionDelimiter("abcdef012345")
CTX = ToolContext("call-1", 1, 1)


@pytest.fixture
def setup():
    clock = ManualClock(T0)
    archive = SensoryArchive(":memory:")
    pipeline = Pipeline(archive, CATALOGUE.values())

    async def pending() -> str:
        return render_pool_event(pipeline.drain(clock(), force=True), D, now=clock())

    registry = ToolRegistry(perception_tools(pipeline, clock=clock, delimiter=D,
                                             pending=pending))
    yield clock, pipeline, registry
    archive.close()


async def call(registry, name, **args):
    return await registry.call(ToolCall("c1", name, json.dumps(args)), CTX)


def test_the_tools_and_their_side_effects(setup):
    _, _, registry = setup
    assert registry.names() == ["get_sensor_capabilities", "lookup_sensory_archive",
                                "pool_event", "sensor_start", "sensor_status", "sensor_stop"]
    effects = {n: registry.get(n).side_effects for n in registry.names()}
    assert effects == {"get_sensor_capabilities": False, "lookup_sensory_archive": False,
                       "pool_event": False, "sensor_start": True, "sensor_status": False,
                       "sensor_stop": True}


async def test_capabilities_list_every_sense_and_its_state(setup):
    _, pipeline, registry = setup
    pipeline.stop(["logs"], 600, T0)
    result = await call(registry, "get_sensor_capabilities")
    assert not result.is_error
    text = result.content
    assert "logs: log lines" in text and "counted per pattern over 1 min windows" in text
    assert "messages of one sender merged until 5 s of quiet (held at most 30 s)" in text
    assert "user: the person at the terminal" in text and "cannot be silenced" in text
    assert "silenced until 23:10:00 (10 min left)" in text


async def test_stop_status_and_start_on_a_fake_clock(setup):
    clock, pipeline, registry = setup
    result = await call(registry, "sensor_stop", channels=["logs", "files"], duration="15m")
    assert "Silenced logs, files until 23:15:00, 15 min from now" in result.content
    for _ in range(30):
        clock.advance(10)
        pipeline.ingest(event("logs", "boom", key="boom"), clock())
    status = (await call(registry, "sensor_status", channels=["logs"])).content
    assert "silenced until 23:15:00 (10 min left), 30 dropped so far (archived in batch b1)" \
        in status
    assert "1 min: 6 (6.0/min), 6 dropped" in status and "Since start: 30 received" in status
    clock.advance(600)  # past the end: reopened by itself
    assert (await call(registry, "sensor_status", channels=["files"])).content.startswith(
        "files: active.")
    await call(registry, "sensor_stop", channels=["chat"], duration=60)
    started = await call(registry, "sensor_start", channels=["chat", "mail"])
    assert started.content == "Reopened chat. Already active: mail."


async def test_refusals_are_errors_the_model_can_read(setup):
    registry = setup[2]
    cases = [
        ("sensor_stop", {"channels": ["user"], "duration": "5m"}, "cannot be silenced: user"),
        ("sensor_stop", {"channels": ["telegram"], "duration": "5m"}, "unknown channel"),
        ("sensor_stop", {"channels": ["logs"], "duration": "soon"}, "cannot read 'soon'"),
        ("sensor_stop", {"channels": [], "duration": "5m"}, "at least one channel"),
        ("sensor_start", {"channels": ["nowhere"]}, "Known channels: chat, files"),
        ("lookup_sensory_archive", {"batch_id": "b404"}, "there is no batch b404"),
        ("lookup_sensory_archive", {"batch_id": "yesterday"}, "is not a batch ID"),
    ]
    for name, args, message in cases:
        result = await call(registry, name, **args)
        assert result.is_error and message in result.content, (name, result.content)


async def test_pool_event_returns_what_is_pending(setup):
    _, pipeline, registry = setup
    assert (await call(registry, "pool_event")).content == "No new events."
    pipeline.ingest(event("chat", "hola", sender="ana", authorised=True), T0)
    text = (await call(registry, "pool_event")).content
    assert text.startswith(D.open("pool_event")) and "[23:00:00] hola" in text
    assert (await call(registry, "pool_event")).content == "No new events."


async def test_lookup_pages_through_a_gap_inside_an_envelope(setup):
    _, pipeline, registry = setup
    for i in range(12):
        pipeline.ingest(event("files", f"added: f{i} \u202eexe.txt", at=T0 + i), T0 + i)
    [run] = pipeline.drain(T0 + 12)
    gap = run.omitted[0]
    result = await call(registry, "lookup_sensory_archive", batch_id=gap.batch_id,
                        offset=gap.first, limit=3)
    text = result.content
    assert text.startswith(f"Batch {gap.batch_id}: 12 events from \"files\" on channel files")
    assert "Offsets 2–4: 3 of 10 events from offset 2 on." in text
    assert '#2 [23:00:02] "files" authorised=no: added:ˆf2ˆexe.txt' in text
    assert D.open("archive", f"batch={gap.batch_id} channel=files") in text
    assert text.endswith("More: call again with offset=5.") and "\u202e" not in text
    filtered = await call(registry, "lookup_sensory_archive", batch_id=gap.batch_id,
                          filter="F11")
    assert "#11 " in filtered.content and "#10 " not in filtered.content
