"""Mail that never speaks with the person's authority, whoever it is from.

Two kinds, besides a stranger's (`authresults.py`):

- **Automatic mail** (RFC 3834 and the older conventions): an
  `Auto-Submitted` header other than `no`; `Precedence: bulk`, `list` or
  `junk`; an `X-Autoreply` or `X-Autorespond` header; a delivery report
  (`multipart/report; report-type=delivery-status`); an empty envelope
  sender (`Return-Path: <>`, what bounces carry). An out-of-office reply
  from the person's own address is still not the person asking for
  something, and answering it is how two robots mail each other for ever.
- **A replay**: the person's mail (one that passed the checks) whose
  Message-ID the channel already received from the same address at another
  place (folder, UIDVALIDITY, UID). A signed mail of the person stays
  validly signed when someone sends it again; the second copy is not the
  person speaking again. Only the person's mail is recorded (`state.py`),
  so a stranger cannot claim the person's Message-ID first.

Both still reach the model, as outside data that says why, and neither is
answered by the reply router (it answers only the person's messages).
"""

from __future__ import annotations

from email.message import Message

from .authresults import Verdict, judge
from .settings import MailSettings

AUTO_PRECEDENCE = frozenset({"bulk", "list", "junk"})


def automatic(message: Message) -> str | None:
    """Why `message` is automatic mail, in a few words, or None."""
    def value(name: str) -> str | None:
        try:
            found = message.get(name)
        except Exception:  # an unreadable header of this kind still says what it is
            return ""
        return None if found is None else " ".join(str(found).split()).lower()

    submitted = value("Auto-Submitted")
    if submitted is not None and submitted.split(";")[0].strip() != "no":
        return f"Auto-Submitted: {submitted or '(unreadable)'}"
    precedence = value("Precedence")
    if precedence is not None and precedence.strip() in AUTO_PRECEDENCE:
        return f"Precedence: {precedence.strip()}"
    for name in ("X-Autoreply", "X-Autorespond"):
        if value(name) is not None:
            return f"an {name} header"
    try:
        kind = message.get_content_type()
        report = (message.get_param("report-type") or "") if kind == "multipart/report" else ""
    except Exception:
        kind, report = "", ""
    if kind == "multipart/report" and str(report).lower() == "delivery-status":
        return "a delivery status report"
    return_path = value("Return-Path")
    if return_path is not None and return_path.strip() in ("<>", ""):
        return "an empty Return-Path (a bounce)"
    return None


def who(settings: MailSettings, message: Message, senders: tuple[str, ...]) -> Verdict:
    """`authresults.judge` with the channel's settings."""
    return judge(message, senders, settings.allow_from, settings.authentication,
                 settings.trusted_authserv_id,
                 authserv_configured=settings.authserv_configured)


def place(folder: str, uidvalidity: int, uid: int) -> str:
    """Where a mail was received, as the replay record keeps it."""
    return f"{folder}/{uidvalidity}/{uid}"
