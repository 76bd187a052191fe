"""Start-up overhead of the shell sandbox: `true` under bubblewrap against
`true` run bare, through the same process runner, measured in the same run;
then with the system-call filter; then with the open guard as well (each open,
link and rename of the command decided by the agent's supervisor; bubblewrap's
own set-up calls go through it unchanged); then through `Sandbox.run`, which
adds the command's resource limits (its cgroups made, joined between fork and
exec, and removed), without the guard and with it (what a command of the
shell tool gets). Also shows the
whole `shell_execute("true")` tool call (sandbox, open guard, and the
versioning of the workspace before and after). Prints figures; asserts nothing.

    .venv/bin/python bench/sandbox_overhead.py [--rounds 100] [--smoke]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from noema.paths import AgentPaths
from noema.security.limits import capped_by
from noema.security.open_guard import policy_secrets
from noema.security.policy import AccessPolicy, Root
from noema.security.seccomp import program_fd
from noema.security.sandbox import Layout, Output, Sandbox, run_process, sandbox_env
from noema.security.settings import (
    AutonomySettings,
    FilesSettings,
    HandsSettings,
    DEFAULT_DENY,
    RootSettings,
    ShellSettings,
)
from noema.tools.hands import build_hands
from noema.tools.registry import ToolContext, ToolRegistry


async def timed(once) -> float:
    started = time.perf_counter()
    await once()
    return (time.perf_counter() - started) * 1000


def line(name: str, samples: list[float]) -> float:
    p50 = statistics.median(samples)
    p90 = statistics.quantiles(samples, n=10)[-1]
    print(f"{name:<46} p50 {p50:7.2f} ms   p90 {p90:7.2f} ms")
    return p50


async def main(rounds: int) -> None:
    if shutil.which("bwrap") is None:
        print("bubblewrap is not installed: nothing to measure")
        return
    with tempfile.TemporaryDirectory() as scratch:
        ws = Path(scratch) / "ws"
        ws.mkdir()
        layout = Layout(ws, (ws,))
        sandbox = Sandbox(ShellSettings())
        await sandbox.check(layout)

        async def bare():
            await run_process(
                ["/bin/sh", "-c", "true"],
                cwd=ws,
                env=sandbox_env(),
                timeout_s=30,
                output=Output(4000),
            )

        async def boxed():
            await run_process(
                sandbox.argv(layout, "true"),
                cwd=ws,
                env=sandbox_env(),
                timeout_s=30,
                output=Output(4000),
            )

        secrets = policy_secrets(AccessPolicy([Root(ws, True)], DEFAULT_DENY))

        async def filtered(guard=None):
            fd = program_fd(network=False)
            try:
                await run_process(
                    sandbox.argv(layout, "true", seccomp_fd=fd),
                    cwd=ws,
                    env=sandbox_env(),
                    timeout_s=30,
                    output=Output(4000),
                    pass_fds=(fd,),
                    secrets=guard,
                )
            finally:
                os.close(fd)

        async def guarded():
            await filtered(secrets)

        settings = HandsSettings(
            files=FilesSettings(roots=(RootSettings(path=ws),)),
            autonomy=AutonomySettings(tools={"shell_execute": "allow"}),
        )
        hands = build_hands(settings, AgentPaths.for_agent("bench", Path(scratch) / "home"))
        registry = ToolRegistry(hands.tools)
        tool = registry.get("shell_execute")
        assert tool is not None

        async def limited(chosen=layout):
            await sandbox.run(chosen, "true", 30, Output(4000))

        async def limited_guarded():
            await limited(replace(layout, secrets=secrets))

        async def whole():
            result = await registry.run(
                tool, {"command": "true", "timeout": None}, ToolContext("c", 1, 1)
            )
            assert not result.is_error, result.content

        await whole()  # the first call also records the workspace's initial state
        # Interleaved rounds, so that a burst of load on the machine hits all alike.
        bare_s, boxed_s, filtered_s, guarded_s, limited_s, whole_s = [], [], [], [], [], []
        limited_guarded_s = []
        for _ in range(rounds):
            bare_s.append(await timed(bare))
            boxed_s.append(await timed(boxed))
            filtered_s.append(await timed(filtered))
            guarded_s.append(await timed(guarded))
            limited_s.append(await timed(limited))
            limited_guarded_s.append(await timed(limited_guarded))
            whole_s.append(await timed(whole))
        hands.close()

    print(f"{rounds} rounds each\n")
    base = line("sh -c true, bare (baseline)", bare_s)
    box = line("sh -c true under bubblewrap", boxed_s)
    sieve = line("sh -c true under bubblewrap, with its filter", filtered_s)
    guard = line("... and the open guard", guarded_s)
    run = line("sh -c true under bubblewrap, with limits", limited_s)
    run_guarded = line("... with limits and the open guard", limited_guarded_s)
    tool_p50 = line('shell_execute("true"), whole tool call', whole_s)
    print(
        f"\nsandbox start-up overhead: {box - base:.2f} ms at p50 (×{box / base:.1f} the bare run)"
    )
    print(f"the system-call filter adds {sieve - box:.2f} ms at p50")
    print(f"the open guard adds {guard - sieve:.2f} ms at p50")
    print(f"with the resource limits: {run - base:.2f} ms at p50 ({capped_by(sandboxed=True)})")
    print(f"with the limits and the open guard: {run_guarded - base:.2f} ms at p50")
    print(f"whole tool call against the bare run: ×{tool_p50 / base:.1f}")
    print("target: overhead <= 30 ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--smoke", action="store_true", help="a few rounds, to see that it runs")
    args = parser.parse_args()
    asyncio.run(main(3 if args.smoke else args.rounds))
