"""The demo's process, followed from any point of its transcript, and stopped."""

from __future__ import annotations

import asyncio
import sys
import threading

from noema.interfaces.web.demo_run import DemoRun, demo_command

WAIT = 20.0

# Three lines written one at a time, each flushed, the way the demo streams.
SCRIPT = ("import sys, time\n"
          "for n in range(3):\n"
          "    sys.stdout.write(f'line {n} é\\n'); sys.stdout.flush(); time.sleep(0.05)\n")


def in_a_loop_of_its_own(test):
    """Run an async test in a thread: Playwright's browser holds this thread's loop."""
    def run() -> None:
        failure: list[BaseException] = []

        def target() -> None:
            try:
                asyncio.run(test())
            except BaseException as exc:  # handed to the test's thread
                failure.append(exc)

        thread = threading.Thread(target=target)
        thread.start()
        thread.join(WAIT * 2)
        assert not thread.is_alive(), "the test did not finish"
        if failure:
            raise failure[0]

    run.__name__, run.__doc__ = test.__name__, test.__doc__
    return run


async def transcript(run: DemoRun, after: int = 0) -> tuple[str, int | None, list[int]]:
    text, code, ids = "", None, []
    async for piece in run.follow(after):
        ids.append(piece.index)
        if piece.code is not None:
            code = piece.code
        text += piece.text
    return text, code, ids


@in_a_loop_of_its_own
async def test_the_transcript_is_followed_whole_and_resumed_without_repeats():
    run = DemoRun(command=[sys.executable, "-c", SCRIPT])
    assert await run.start()
    assert not await run.start()  # one at a time: the page follows the running one
    text, code, ids = await asyncio.wait_for(transcript(run), WAIT)
    assert text == "line 0 é\nline 1 é\nline 2 é\n" and code == 0
    assert ids == sorted(ids) and ids[-1] == len(run.pieces)
    middle = ids[0]  # a page that saw the first piece, then reconnected
    rest, code, _ = await transcript(run, after=middle)
    assert "".join(run.pieces[:middle]) + rest == text and code == 0


@in_a_loop_of_its_own
async def test_stop_ends_the_demo_and_its_children():
    # A demo and a child of its own that both wait for a signal, never ending alone.
    run = DemoRun(command=[sys.executable, "-c",
                           "import signal, subprocess, sys\n"
                           "subprocess.Popen([sys.executable, '-c', 'import signal; signal.pause()'])\n"
                           "print('started', flush=True); signal.pause()\n"])
    await run.start()
    pieces = run.follow()
    first = await asyncio.wait_for(anext(pieces), WAIT)
    assert first.text.startswith("started")
    await asyncio.wait_for(run.stop(), WAIT)
    assert run.code is not None and run.code < 0 and not run.running
    await pieces.aclose()


@in_a_loop_of_its_own
async def test_nothing_started_means_nothing_to_follow():
    assert [p async for p in DemoRun().follow()] == []


def test_the_command_is_noema_demo_at_the_page_s_pace():
    assert demo_command(0.02)[1:] == ["-m", "noema", "demo", "--pace", "0.02"]
