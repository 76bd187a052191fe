"""What an idle `noema run` costs: its memory and its share of a core.

    .venv/bin/python bench/idle_agent.py [SECONDS] [--warmup S]
    .venv/bin/python bench/idle_agent.py --smoke

Three processes run side by side for the same window, each in a fresh
temporary home:

- `python`, a bare interpreter that imports nothing (the floor any Python
  process pays);
- `noema run` with two log files and a folder to watch, a workspace (its
  state at start is recorded by a short child process) and no channel;
- `noema run` with the same plus mail and Telegram configured: a Dovecot of
  its own on 127.0.0.1 (IMAP, IDLE) with an SMTP relay in front of it, and
  the fake Telegram Bot API on 127.0.0.1 with real long polling;
- the same again, after one exchange: its model is the fake Chat
  Completions server (the official openai client), the person asks on
  Telegram, the model writes a file (a versioned write) and answers. What
  the first request and the first write load stays loaded: this is the
  memory of an agent that has been used, then left idle.

For the first two agents a model is configured but never asked: nobody
writes. After `--warmup`
seconds (start-up work ends, the channels connect) the processes are sampled
once a second for SECONDS (default 600). Printed per process: resident
memory (VmRSS at the end and at its highest; of it anonymous and file-backed
from /proc/PID/status), PSS and USS (the memory only this process holds,
private clean + private dirty) from /proc/PID/smaps_rollup, and the CPU time
(user + system, every thread) over the wall time as a percentage of one
core. Then the agents are stopped with SIGTERM and the time that took is
printed. Targets (issue 11), for the agent with mail and Telegram: RSS <= 60
MB and CPU <= 0.5 % of a core.

Without Dovecot installed the third agent runs with Telegram only, and the
report says so. Before sampling, the bench checks that this agent really is
connected to the IMAP server and is long polling the Bot API.

`--smoke` samples for 3 seconds after a 3-second warm-up.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # for tests.fakes and tests.mail

from tests.fakes import FakeOpenAIServer, FakeReply  # noqa: E402
from tests.fakes.script import FakeToolCall  # noqa: E402
from tests.fakes.telegram_server import TOKEN, FakeTelegramServer  # noqa: E402
from tests.mail.servers import MAIL_DOMAIN, PASSWORD, Dovecot, SmtpRelay, available  # noqa: E402

TARGET_RSS_MB = 60.0
TARGET_CPU_PERCENT = 0.5
TICKS = os.sysconf("SC_CLK_TCK")
CHAT = 4242
CONNECT_WAIT = 20.0  # seconds for the channels to connect on a loaded machine


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process, all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _kib_fields(path: Path) -> dict[str, float]:
    """The `Name:  N kB` lines of a /proc file, in MB."""
    found = {}
    for line in path.read_text().splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if len(parts) == 2 and parts[1] == "kB":
            found[name] = int(parts[0]) / 1024
    return found


@dataclass(frozen=True, slots=True)
class Memory:
    """One reading of a process's memory, in MB."""

    rss: float
    anon: float
    file: float
    pss: float | None  # None where smaps_rollup cannot be read
    uss: float | None


def memory(pid: int) -> Memory:
    status = _kib_fields(Path(f"/proc/{pid}/status"))
    try:
        rollup = _kib_fields(Path(f"/proc/{pid}/smaps_rollup"))
        pss = rollup["Pss"]
        uss = rollup["Private_Clean"] + rollup["Private_Dirty"]
    except (OSError, KeyError):
        pss = uss = None
    return Memory(status["VmRSS"], status.get("RssAnon", 0.0), status.get("RssFile", 0.0),
                  pss, uss)


def connected_to(pid: int, port: int) -> bool:
    """Whether the process holds an established TCP connection to 127.0.0.1:`port`."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        cols = line.split()
        remote, state, inode = cols[2], cols[3], cols[9]
        if state == "01" and inode in inodes and int(remote.split(":")[1], 16) == port:
            return True
    return False


@dataclass
class Subject:
    """One process under measurement and its samples."""

    name: str
    process: subprocess.Popen
    is_agent: bool
    began_cpu: float = 0.0
    peak: float = 0.0
    last: Memory | None = None
    used: float = 0.0
    stop_seconds: float | None = None
    exit_code: int | None = None
    said: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.process.pid


def agent_home(home: Path, *, mail: tuple[Dovecot, SmtpRelay, str] | None = None,
               telegram: FakeTelegramServer | None = None,
               model: FakeOpenAIServer | None = None) -> dict[str, str]:
    """A default agent with two logs, a folder and the channels given, and a
    model (the scripted one, never asked, unless `model` is given); the
    environment `noema run` gets."""
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
    if model is not None:
        config = ("[models.reasoning]\nprovider = 'openai-compatible'\nmodel = 'fake-model'\n"
                  f"base_url = '{model.base_url}'\n")
    config += "".join(f"[[perception.logs]]\npath = '{log}'\n" for log in logs)
    config += f"[[perception.folders]]\npath = '{watched}'\n"
    # A workspace of its own (the default one is in the real home): its state
    # at start is recorded (by a child process), as for every agent.
    workspace = home / "workspace"
    workspace.mkdir()
    (workspace / "notes.md").write_text("# Notes\n")
    config += f"[[files.roots]]\npath = '{workspace}'\nmode = 'read-write'\n"
    secrets = []
    if mail is not None:
        dovecot, relay, user = mail
        config += (f"[mail]\nimap_host = '127.0.0.1'\nimap_port = {dovecot.port}\n"
                   "imap_security = 'none'\nsmtp_host = '127.0.0.1'\n"
                   f"smtp_port = {relay.port}\nsmtp_security = 'none'\n"
                   f"username = '{user}'\naddress = '{user}@{MAIL_DOMAIN}'\n"
                   f"allow_from = ['ana1@{MAIL_DOMAIN}']\n")
        secrets.append(f'NOEMA_MAIL_PASSWORD = "{PASSWORD}"\n')
    if telegram is not None:
        config += f"[telegram]\nchat_ids = [{CHAT}]\nbase_url = '{telegram.base_url}'\n"
        secrets.append(f'TELEGRAM_BOT_TOKEN = "{TOKEN}"\n')
    (agent / "config.toml").write_text(config)
    if secrets:
        (agent / "secrets.toml").write_text("".join(secrets))
        (agent / "secrets.toml").chmod(0o600)
    clean = {k: v for k, v in os.environ.items()
             if not k.startswith("NOEMA") and k != "TELEGRAM_BOT_TOKEN"}
    return {**clean, "NOEMA_HOME": str(home), "PYTHONUNBUFFERED": "1"}


def start_agent(name: str, env: dict[str, str]) -> Subject:
    process = subprocess.Popen([sys.executable, "-m", "noema", "run"], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, text=True)
    first = process.stderr.readline()
    if "runs (pid" not in first:
        process.kill()
        raise RuntimeError(f"{name}: noema run did not start: {first}{process.stderr.read()}")
    return Subject(name, process, is_agent=True)


def wait_connected(subject: Subject, imap_port: int | None,
                   telegram: FakeTelegramServer) -> None:
    """Block until the agent holds its IMAP connection (in IDLE) and its long
    poll to the Bot API (the fake counts a call only once answered: the open
    connection after `getMe` is the poll waiting)."""
    telegram_port = int(telegram.base_url.rsplit(":", 1)[1])

    def state() -> tuple[bool, bool]:
        imap = imap_port is None or connected_to(subject.pid, imap_port)
        polling = telegram.calls("getMe") >= 1 and connected_to(subject.pid, telegram_port)
        return imap, polling

    deadline = time.monotonic() + CONNECT_WAIT
    while time.monotonic() < deadline:
        if all(state()):
            return
        time.sleep(0.1)
    imap, polling = state()
    raise RuntimeError(f"{subject.name}: the channels did not connect within {CONNECT_WAIT} s "
                       f"(IMAP connected {imap}, Telegram polling {polling})")


def use(subject: Subject, telegram: FakeTelegramServer, model: FakeOpenAIServer,
        workspace: Path) -> None:
    """One exchange: the person asks on Telegram, the model writes a file and
    answers; block until the answer is sent, and check that the file was
    written (a refused write would leave the history library unloaded)."""
    content = "# Notes\n\n- call the plumber\n"
    note = json.dumps({"path": "notes.md", "content": content})
    model.script(FakeReply(tool_calls=(FakeToolCall("file_write", note),)),
                 FakeReply(text="Noted in notes.md."))
    telegram.inject_text(CHAT, "Note that I must call the plumber.")
    deadline = time.monotonic() + CONNECT_WAIT
    while time.monotonic() < deadline:
        if any(m.chat_id == CHAT and "Noted in notes.md" in m.plain for m in telegram.sent):
            if (workspace / "notes.md").read_text() != content:
                raise RuntimeError(f"{subject.name}: the model's file_write did not happen")
            return
        time.sleep(0.1)
    raise RuntimeError(f"{subject.name}: no answer within {CONNECT_WAIT} s "
                       f"({len(model.requests)} requests to the model)")


def stop(subject: Subject) -> None:
    began = time.monotonic()
    subject.process.send_signal(signal.SIGTERM)
    subject.exit_code = subject.process.wait(30)
    subject.stop_seconds = time.monotonic() - began
    if subject.is_agent:
        lines = subject.process.stderr.read().strip().splitlines()
        subject.said = lines[-1] if lines else "nothing said"


def sample(subjects: list[Subject], seconds: float) -> float:
    """Sample every second for `seconds`; the wall time the window took."""
    began = time.monotonic()
    for s in subjects:
        s.began_cpu = cpu_seconds(s.pid)
        s.peak = memory(s.pid).rss
    while time.monotonic() - began < seconds:
        time.sleep(1.0)
        for s in subjects:
            s.peak = max(s.peak, memory(s.pid).rss)
    wall = time.monotonic() - began
    for s in subjects:
        s.used = cpu_seconds(s.pid) - s.began_cpu
        s.last = memory(s.pid)
    return wall


def mb(value: float | None) -> str:
    return "   n/a" if value is None else f"{value:6.1f}"


def report(subjects: list[Subject], wall: float, warmup: float, with_mail: bool) -> None:
    print(f"idle processes sampled {wall:.0f} s after a {warmup:.0f} s warm-up; "
          "each agent watches two log files and a folder and has a workspace")
    if not with_mail:
        print("  NOTE: Dovecot is not installed here: the mail figure is without mail "
              "(Telegram only)")
    print(f"  {'':<40}{'RSS':>6} {'peak':>6} {'anon':>6} {'file':>6} {'PSS':>6} {'USS':>6}"
          f"   {'CPU % of a core':>15}")
    for s in subjects:
        m = s.last
        share = 100 * s.used / wall
        print(f"  {s.name:<40}{mb(m.rss)} {mb(s.peak)} {mb(m.anon)} {mb(m.file)} "
              f"{mb(m.pss)} {mb(m.uss)}   {share:8.3f} ({s.used:.2f} s)")
    print("  (MB; RSS = anon + file + shared memory; USS = private clean + private dirty)")
    bare, plain, full, used = subjects
    share = 100 * full.used / wall
    print(f"\n  {full.name} against the target:")
    print(f"    RSS {full.last.rss:.1f} MB (highest {full.peak:.1f}) vs <= {TARGET_RSS_MB:.0f} MB: "
          f"{'met' if full.peak <= TARGET_RSS_MB else 'NOT met'}")
    print(f"    CPU {share:.3f} % of a core vs <= {TARGET_CPU_PERCENT} %: "
          f"{'met' if share <= TARGET_CPU_PERCENT else 'NOT met'}")
    print(f"    above a bare python: {full.last.rss - bare.last.rss:.1f} MB RSS; "
          f"the channels add {full.last.rss - plain.last.rss:.1f} MB to the agent without them")
    print(f"    after one exchange (the model's client and pygit2 loaded): RSS "
          f"{used.last.rss:.1f} MB, {used.last.rss - full.last.rss:+.1f} MB")
    for s in (plain, full, used):
        print(f"  {s.name}: SIGTERM to exit {s.stop_seconds:.2f} s, exit status {s.exit_code} "
              f"({s.said})")


# What the agent loads, in the order it loads it; each step is measured on top
# of the ones before it, so the figures add up to the agent's import cost.
LAYERS = (
    ("asyncio, ssl, sqlite3, email (standard library)", "asyncio, ssl, sqlite3, email.message"),
    ("pydantic", "pydantic"),
    ("click, watchfiles", "click, watchfiles"),
    ("noema's own modules for `noema run` (with the mail channel)",
     "noema.cli, noema.interfaces.commands.run, noema.app, noema.channels.mail.channel"),
    ("python-telegram-bot with httpx (without cryptography or httpx's CLI)",
     "noema.channels.telegram.library"),
    ("the Telegram channel", "noema.channels.telegram.channel"),
)
# Not loaded by an idle agent, measured on top for the record: pygit2 comes
# with the first versioned write, httpx2 and the model's SDK with the first
# request or web read.
LATER = (
    ("pygit2 (at the first versioned write)", "pygit2"),
    ("httpx2 and the openai SDK (at the first request)", "httpx2, openai"),
)

_LAYER_PROBE = """
import importlib, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
print(rss(), len(sys.modules), flush=True)
for names in sys.argv[1:]:
    for name in names.split(", "):
        importlib.import_module(name)
    print(rss(), len(sys.modules), flush=True)
"""


def layers() -> list[tuple[str, float, int]]:
    """(what, MB, modules) that each layer of imports adds, in a fresh
    interpreter: the agent's layers, then the ones that come with use."""
    steps = (*LAYERS, *LATER)
    done = subprocess.run([sys.executable, "-c", _LAYER_PROBE, *(m for _, m in steps)],
                          capture_output=True, text=True, check=True, cwd=HERE.parent)
    readings = [tuple(map(float, line.split())) for line in done.stdout.splitlines()]
    found = [("a bare python", readings[0][0], int(readings[0][1]))]
    for (what, _), before, after in zip(steps, readings[:-1], readings[1:], strict=True):
        found.append((what, after[0] - before[0], int(after[1] - before[1])))
    return found


def report_layers(found: list[tuple[str, float, int]]) -> None:
    print("\n  where the memory goes: RSS each layer of imports adds, in a fresh interpreter")
    total = 0.0
    idle = len(LAYERS) + 1
    for n, (what, added, modules) in enumerate(found):
        if n == idle:
            print("    not loaded by an idle agent; they come with use:")
        total += added
        print(f"    {what:<70}{added:+7.1f} MB {modules:5d} modules   (sum {total:5.1f})")


def measure(seconds: float, warmup: float) -> int:
    with_mail = available() is None
    dovecot = relay = None
    subjects: list[Subject] = []
    with tempfile.TemporaryDirectory(prefix="noema-idle-") as folder, \
            FakeTelegramServer() as telegram, FakeTelegramServer() as telegram2, \
            FakeOpenAIServer() as model:
        root = Path(folder)
        try:
            mail = mail2 = None
            if with_mail:
                dovecot = Dovecot.create()
                dovecot.start()
                relay = SmtpRelay(dovecot)
                relay.start()
                mail = (dovecot, relay, dovecot.new_user("agent"))
                mail2 = (dovecot, relay, dovecot.new_user("agent"))
            bare = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1e6)"],
                                    stdin=subprocess.DEVNULL)
            subjects.append(Subject("python, nothing imported", bare, is_agent=False))
            subjects.append(start_agent("noema run, no channels",
                                        agent_home(root / "plain")))
            label = "noema run, mail + Telegram" if with_mail else "noema run, Telegram only"
            full = start_agent(label, agent_home(root / "full", mail=mail, telegram=telegram))
            subjects.append(full)
            used = start_agent(f"{label}, used once", agent_home(
                root / "used", mail=mail2, telegram=telegram2, model=model))
            subjects.append(used)
            wait_connected(full, dovecot.port if dovecot else None, telegram)
            wait_connected(used, dovecot.port if dovecot else None, telegram2)
            use(used, telegram2, model, root / "used" / "workspace")
            time.sleep(warmup)
            wall = sample(subjects, seconds)
            for s in subjects:
                stop(s)
        finally:
            for s in subjects:
                if s.process.poll() is None:
                    s.process.kill()
                    s.process.wait()
            if relay is not None:
                relay.stop()
            if dovecot is not None:
                dovecot.stop()
    report(subjects, wall, warmup, with_mail)
    report_layers(layers())
    return 0 if all(s.exit_code == 0 for s in subjects if s.is_agent) else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("seconds", nargs="?", type=float, default=600.0,
                        help="how long to sample (default 600)")
    parser.add_argument("--warmup", type=float, default=15.0,
                        help="seconds to let the start-up work end first (default 15)")
    parser.add_argument("--smoke", action="store_true", help="3 s of samples, 3 s warm-up")
    args = parser.parse_args()
    if args.smoke:
        return measure(3.0, 3.0)
    return measure(args.seconds, args.warmup)


if __name__ == "__main__":
    sys.exit(main())
