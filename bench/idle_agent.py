"""What an idle `noema run` costs: its memory and its share of a core.

    .venv/bin/python bench/idle_agent.py [SECONDS] [--warmup S]
    .venv/bin/python bench/idle_agent.py --smoke

Starts `noema run` for a fresh agent in a temporary home, with two log files
and a folder to watch (a model is configured but never asked: nobody
writes), waits `--warmup` seconds for the start-up work to end, then samples
the process once a second for SECONDS (default 600): its resident memory
(VmRSS) and the CPU time it used (user + system, every thread). It prints
the RSS at the end and at its highest, and the CPU time over the wall time
as a percentage of one core; then it stops the agent with SIGTERM and says
how long that took. Targets: RSS <= 60 MB and CPU <= 0.5 %.

`--smoke` samples for 3 seconds after a 2-second warm-up.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_RSS_MB = 60.0
TARGET_CPU_PERCENT = 0.5
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS for the process")


def prepare(home: Path) -> dict[str, str]:
    """A default agent with a model that is never asked, two logs and a folder."""
    agent = home / "agents" / "default"
    agent.mkdir(parents=True)
    (agent / "script.toml").write_text('[[responses]]\ntext = "unused"\n')
    watched = home / "watched"
    watched.mkdir()
    logs = [home / "app.log", home / "system.log"]
    for log in logs:
        log.write_text("started\n")
    config = ("[models.reasoning]\nprovider = 'scripted'\nmodel = 'script'\n"
              "script = 'script.toml'\n")
    config += "".join(f"[[perception.logs]]\npath = '{log}'\n" for log in logs)
    config += f"[[perception.folders]]\npath = '{watched}'\n"
    (agent / "config.toml").write_text(config)
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NOEMA")}
    return {**clean, "NOEMA_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def measure(seconds: float, warmup: float) -> int:
    with tempfile.TemporaryDirectory(prefix="noema-idle-") as folder:
        env = prepare(Path(folder))
        agent = subprocess.Popen([sys.executable, "-m", "noema", "run"], env=env,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                 stderr=subprocess.PIPE, text=True)
        try:
            first = agent.stderr.readline()
            if "runs (pid" not in first:
                print(f"noema run did not start: {first}{agent.stderr.read()}", file=sys.stderr)
                return 1
            time.sleep(warmup)
            pid = agent.pid
            began_wall, began_cpu = time.monotonic(), cpu_seconds(pid)
            peak = rss_mb(pid)
            while time.monotonic() - began_wall < seconds:
                time.sleep(1.0)
                peak = max(peak, rss_mb(pid))
            wall = time.monotonic() - began_wall
            used = cpu_seconds(pid) - began_cpu
            last = rss_mb(pid)
            stop_began = time.monotonic()
            agent.send_signal(signal.SIGTERM)
            code = agent.wait(30)
            stop = time.monotonic() - stop_began
            said = agent.stderr.read().strip().splitlines()
        finally:
            if agent.poll() is None:
                agent.kill()
                agent.wait()
    share = 100 * used / wall
    print(f"idle noema run, sampled {wall:.0f} s after a {warmup:.0f} s warm-up "
          "(two log files and a folder watched)")
    print(f"  RSS     at the end {last:.1f} MB, highest {peak:.1f} MB "
          f"(target <= {TARGET_RSS_MB:.0f} MB)")
    print(f"  CPU     {used:.2f} s in {wall:.0f} s = {share:.3f} % of a core "
          f"(target <= {TARGET_CPU_PERCENT} %)")
    print(f"  SIGTERM to exit {stop:.2f} s, exit status {code}"
          f" ({said[-1] if said else 'nothing said'})")
    return 0 if code == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seconds", nargs="?", type=float, default=600.0,
                        help="how long to sample (default 600)")
    parser.add_argument("--warmup", type=float, default=15.0,
                        help="seconds to let the start-up work end first (default 15)")
    parser.add_argument("--smoke", action="store_true", help="3 s of samples, 2 s warm-up")
    args = parser.parse_args()
    if args.smoke:
        return measure(3.0, 2.0)
    return measure(args.seconds, args.warmup)


if __name__ == "__main__":
    sys.exit(main())
