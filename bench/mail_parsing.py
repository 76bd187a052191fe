"""Mail parsing with bounds: memory and time of reading hostile mail.

Four mails: a 60 MB attachment, a To line of 20,000 recipients, MIME nested
1,000 deep, and a 2,800-character subject with 500 attachments. Each is read
two ways, each in a fresh process (so one reading's memory is not another's):

- `whole`: the standard library's parse of the whole message in memory
  (`email.message_from_bytes` with the default policy, `get_body`, a walk
  over the attachments, the recipients read), with the raw bytes held, as
  they were when IMAP handed them over: how mail was read before;
- `bounded`: `message.scan` over the mail in a file (where `email_read`
  now spools what it fetches): one pass, attachments counted, not held.

With `--imap`, the 60 MB mail is also fetched from a real Dovecot on
127.0.0.1: one `BODY.PEEK[]` (before) against `ImapConnection.download`
in 1 MB pieces into a spooled file (now).

Figures: the growth of the process's peak resident memory over its size
before the reading, and the wall time. Prints figures; asserts nothing.

    .venv/bin/python bench/mail_parsing.py [--imap] [--only big]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from email.message import EmailMessage
from email.policy import SMTP
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # for tests.mail

CASES = ("big", "recipients", "nested", "names")


def make(case: str) -> bytes:
    """The raw mail of one case."""
    if case == "big":
        message = EmailMessage(policy=SMTP)
        message["From"] = "Big <big@outside.test>"
        message["To"] = "agent@noema.test"
        message["Subject"] = "the big one"
        message.set_content("see the archive")
        # 44 MB of file: 60 MB of mail once in base64.
        message.add_attachment(bytes(range(256)) * (44 * 4096), maintype="application",
                               subtype="octet-stream", filename="archive.bin")
        return message.as_bytes()
    if case == "recipients":
        to = ", ".join(f"User {n} <user{n}@many.test>" for n in range(20_000))
        return f"From: a@outside.test\r\nTo: {to}\r\nSubject: many\r\n\r\nbody\r\n".encode()
    if case == "nested":
        from tests.mail.test_reading import nested

        return nested(1000)
    message = EmailMessage(policy=SMTP)
    message["From"] = "Spam <spam@outside.test>"
    message["To"] = "agent@noema.test"
    message["Subject"] = "S" * 2800
    message.set_content("body")
    for n in range(500):
        message.add_attachment(b"x", maintype="text", subtype="plain", filename=f"f{n:03}.txt")
    return message.as_bytes()


def _status_kb(field: str) -> int:
    """A figure of /proc/self/status in KB (VmRSS: now; VmHWM: the peak since exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _rss_kb() -> int:
    return _status_kb("VmRSS")


def _peak_kb() -> int:
    # Not getrusage's ru_maxrss: it keeps the parent's peak across fork and exec.
    return _status_kb("VmHWM")


def _whole(path: Path) -> str:
    import email
    import email.policy
    import email.utils

    raw = path.read_bytes()
    message = email.message_from_bytes(raw, policy=email.policy.default)
    try:
        body = message.get_body(preferencelist=("plain", "html"))
        text = body.get_content() if body is not None else ""
        names = [(p.get_filename(), len(p.get_payload(decode=True) or b""))
                 for p in message.walk() if not p.is_multipart() and p.get_filename()]
        to = email.utils.getaddresses([str(v) for v in message.get_all("To") or []])
        return (f"from {message['From']}, {len(text)} characters of text, {len(names)} "
                f"attachments, {len(to)} recipients")
    except RecursionError:
        return f"RecursionError (sender {message['From']!r} read before the walk failed)"


def _bounded(path: Path) -> str:
    from noema.channels.mail.message import scan

    with path.open("rb") as stream:
        mail = scan(1, stream, path.stat().st_size).mail
    return (f"from {mail.from_address}, {len(mail.text)} characters of text, "
            f"{len(mail.attachments)} attachments, {len(mail.to)} + {mail.to_more} recipients")


def child(case: str, way: str, path: Path) -> None:
    # Loaded before the baseline: the libraries are not the reading's cost.
    import email.policy  # noqa: F401

    import noema.channels.mail.message  # noqa: F401

    before = _rss_kb()
    started = time.perf_counter()
    try:
        said = (_whole if way == "whole" else _bounded)(path)
    except Exception as exc:  # a failure is a figure too
        said = f"{type(exc).__name__}: {exc}"
    took = time.perf_counter() - started
    peak = _peak_kb()
    print(json.dumps({"grew_mb": (peak - before) / 1024, "s": took, "said": said[:160]}))


def run_child(*arguments: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", *arguments],
                          capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        return {"grew_mb": float("nan"), "s": float("nan"),
                "said": done.stderr.strip().splitlines()[-1][:160]}
    return json.loads(done.stdout.strip().splitlines()[-1])


# -- over IMAP ---------------------------------------------------------------------------


async def imap_child(way: str, port: int, user: str) -> None:
    from noema.channels.mail import MailSettings
    from noema.channels.mail.imap import ImapConnection
    from tests.mail.servers import PASSWORD

    settings = MailSettings(imap_host="127.0.0.1", imap_port=port, imap_security="none",
                            username=user, timeout=120)
    connection = await ImapConnection.open(settings, PASSWORD)
    await connection.select("INBOX")
    before = _rss_kb()
    started = time.perf_counter()
    if way == "whole":
        [item] = await connection.fetch([1], "BODY.PEEK[]")
        size = len(item.data)
    else:
        spool = tempfile.SpooledTemporaryFile(max_size=1024 * 1024)
        size = (await connection.sizes([1]))[1]
        await connection.download(1, size, spool.write)
        size = spool.tell()
    took = time.perf_counter() - started
    peak = _peak_kb()
    await connection.close()
    print(json.dumps({"grew_mb": (peak - before) / 1024, "s": took,
                      "said": f"{size / 1024 / 1024:.1f} MB fetched"}))


def imap_figures(raw: bytes) -> None:
    from tests.mail.servers import Dovecot, available

    problem = available()
    if problem:
        print(f"IMAP: skipped ({problem})")
        return
    server = Dovecot.create()
    server.start()
    try:
        user = server.new_user("agent")
        server.deliver(user, raw)
        for way, label in (("whole", "one BODY.PEEK[]"), ("pieces", "download in 1 MB pieces")):
            found = run_child("imap", way, str(server.port), user)
            print(f"  IMAP fetch of the 60 MB mail, {label:26}: +{found['grew_mb']:7.1f} MB, "
                  f"{found['s']:6.2f} s ({found['said']})")
    finally:
        server.stop()


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        if sys.argv[2] == "imap":
            asyncio.run(imap_child(sys.argv[3], int(sys.argv[4]), sys.argv[5]))
        else:
            child(sys.argv[2], sys.argv[3], Path(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--imap", action="store_true", help="also fetch over a real Dovecot")
    parser.add_argument("--only", choices=CASES, help="one case only")
    parser.add_argument("--smoke", action="store_true",
                        help="the small nested case only, to check that the script runs")
    options = parser.parse_args()
    chosen = ("nested",) if options.smoke else (options.only,) if options.only else CASES
    with tempfile.TemporaryDirectory() as folder:
        for case in chosen:
            raw = make(case)
            path = Path(folder) / f"{case}.eml"
            path.write_bytes(raw)
            print(f"{case}: {len(raw) / 1024 / 1024:.2f} MB raw")
            for way in ("whole", "bounded"):
                found = run_child(case, way, str(path))
                print(f"  {way:8}: +{found['grew_mb']:7.1f} MB peak, {found['s']:6.2f} s  "
                      f"({found['said']})")
            if case == "big" and options.imap:
                imap_figures(raw)


if __name__ == "__main__":
    main()
