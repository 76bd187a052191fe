"""What makes a mail the person's; reading mails; composing replies (no server)."""

from __future__ import annotations

import pytest

from noema.channels.mail.authresults import judge, parse_auth_results
from noema.channels.mail.compose import (
    MAX_REFERENCES,
    BadAddress,
    Thread,
    compose,
    parse_recipients,
    reply_subject,
)
from noema.channels.mail.message import parse_bytes, read_mail
from noema.channels.mail.settings import MailSettings

from .conftest import mail

PERSON = "ana@person.test"
ALLOW = (PERSON,)


SIGNED = "from:to:subject:date:message-id"


def signature(domain: str = "person.test", signed: str = SIGNED, selector: str = "sel") -> str:
    """A DKIM-Signature header value as a signer writes it (the server checked it)."""
    return (f"v=1; a=rsa-sha256; c=relaxed/relaxed; d={domain}; s={selector};"
            f" h={signed}; bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=; b=AbCd")


def verdict(auth: str | list[str] | None, sender: str = PERSON, mode: str = "auto",
            signed: str | None = SIGNED, **headers: str):
    message = mail(sender, "agent@noema.test", "s", "b", **headers)
    for value in [auth] if isinstance(auth, str) else auth or []:
        message["Authentication-Results"] = value
    if signed is not None:
        message["DKIM-Signature"] = signature(signed=signed)
    from noema.channels.mail.message import addresses

    return judge(message, addresses(message, "From"), ALLOW, mode, "mx.person.test")


@pytest.mark.parametrize("auth", [
    "mx.person.test; dkim=pass header.d=person.test",
    "mx.person.test; dkim=pass (good signature) header.d=person.test",
    "MX.Person.Test 1; spf=pass smtp.mailfrom=ana@person.test",
    "mx.person.test; spf=none; dmarc=pass header.from=person.test",
    "mx.person.test; auth=pass smtp.auth=ana",
])
def test_a_pass_for_the_persons_domain_from_the_trusted_server_is_the_person(auth):
    assert verdict(auth).person


@pytest.mark.parametrize("auth", [
    "mx.person.test; dkim=fail header.d=person.test; spf=softfail smtp.mailfrom=person.test",
    "mx.person.test; dkim=pass header.d=evil.test",  # a valid signature, by someone else
    "mx.person.test; dkim=pass header.d=mail.person.test",  # a subdomain is not the domain
    "mx.person.test; spf=pass smtp.mailfrom=bounce@evil.test",
    "mx.person.test; auth=pass smtp.auth=mallory",
    "mx.person.test; none",
])
def test_no_aligned_pass_is_not_the_person_and_says_it_claimed(auth):
    found = verdict(auth)
    assert not found.person and found.claimed and "mx.person.test" in found.reason


def test_only_the_topmost_header_of_the_trusted_server_counts():
    # The server prepends its own; a forged one below it, even with its id, is ignored.
    assert not verdict(["mx.person.test; dkim=fail header.d=person.test",
                        "mx.person.test; dkim=pass header.d=person.test"]).person
    # Another server's pass is not the trusted server's word.
    forged = verdict(["evil.test; dkim=pass header.d=person.test",
                      "mx.person.test; dkim=fail header.d=person.test"])
    assert not forged.person


def test_without_trusted_results_auto_trusts_the_from_line_and_require_does_not():
    assert verdict(None).person
    # Results of another server only: one that adds them exists, and it is not trusted.
    other = verdict("mx.elsewhere.test; dkim=pass header.d=person.test")
    assert not other.person and "set [mail] authserv_id" in other.reason
    assert "mx.elsewhere.test" in other.reason
    assert not verdict(None, mode="require").person
    assert verdict("mx.person.test; dkim=fail", mode="off").person


def test_a_stranger_or_several_senders_is_never_the_person():
    assert not verdict("mx.person.test; dkim=pass header.d=x.test", "bob@x.test").claimed
    both = verdict(None, f"{PERSON}, bob@x.test")
    assert not both.person and both.claimed


def test_comments_and_versions_are_read_past():
    parsed = parse_auth_results(
        "mx.example (version (nested)) 1; dkim=pass (2048-bit key) header.d=a.test "
        'header.s="sel"; spf=fail smtp.mailfrom=b.test')
    assert parsed.authserv_id == "mx.example"
    assert [(r.method, r.result) for r in parsed.results] == [("dkim", "pass"), ("spf", "fail")]
    assert parsed.results[0].properties["header.s"] == "sel"


def test_a_broken_mail_is_read_as_far_as_it_goes():
    raw = (b"From: =?bogus-charset?q?x?= <a@b.test>\r\nSubject: =?utf-8?b?!!!?=\r\n"
           b"Content-Type: text/plain; charset=no-such-charset\r\n"
           b"Content-Transfer-Encoding: base64\r\n\r\n%%%not base64%%%\r\n")
    found = read_mail(5, raw)
    assert found.from_address == "a@b.test" and found.uid == 5
    assert isinstance(found.text, str)
    assert read_mail(6, b"").from_address == ""


def test_attachments_are_named_typed_and_sized_and_names_lose_their_paths():
    message = mail("a@b.test", "c@d.test", "s", "body",
                   attachments=(("../../etc/passwd", "text/plain", b"abc"),
                                ("r.pdf", "application/pdf", b"x" * 2048)))
    found = read_mail(1, message.as_bytes())
    assert [(a.name, a.media_type, a.size) for a in found.attachments] == [
        ("passwd", "text/plain", 3), ("r.pdf", "application/pdf", 2048)]
    assert found.text == "body"


def test_html_becomes_readable_text():
    message = mail("a@b.test", "c@d.test", "s", "x")
    message.set_content("<table><tr><td>a</td><td>b</td></tr></table><p>Hi <b>you</b></p>",
                        subtype="html")
    text = read_mail(1, message.as_bytes()).text
    assert "Hi you" in text and "<" not in text


def test_a_reply_subject_gets_re_once():
    assert reply_subject("Plan") == "Re: Plan"
    assert reply_subject("RE: Plan") == "RE: Plan"
    assert reply_subject("") == "Re: (no subject)"


def test_a_reply_carries_the_thread():
    refs = tuple(f"<r{i}@x>" for i in range(30))
    reply = compose(sender="agent@noema.test", display_name="", to=("a@b.test",),
                    subject="", body="ok", thread=Thread("<m@x>", refs, "Plan"))
    parsed = parse_bytes(reply.as_bytes())
    assert parsed["In-Reply-To"] == "<m@x>" and parsed["Subject"] == "Re: Plan"
    kept = str(parsed["References"]).split()
    assert len(kept) == MAX_REFERENCES and kept[0] == "<r0@x>" and kept[-1] == "<m@x>"
    assert parsed["Message-ID"].endswith("@noema.test>")


def test_recipients_are_checked():
    assert parse_recipients("A <A@B.test>, c@d.test, a@b.test") == ("a@b.test", "c@d.test")
    for bad in ("", "nobody", "a@b", "x@y.test, <>"):
        with pytest.raises(BadAddress):
            parse_recipients(bad)


def test_settings_keep_secrets_out_and_need_a_login():
    with pytest.raises(ValueError, match="username"):
        MailSettings(imap_host="imap.example.org")
    settings = MailSettings(imap_host="imap.example.org", username="me@example.org",
                            allow_from=(" Ana@Example.org ",))
    assert settings.allow_from == ("ana@example.org",)
    assert settings.imap_address == ("imap.example.org", 993)
    assert settings.smtp_address == ("imap.example.org", 587)
    assert settings.trusted_authserv_id == "imap.example.org"
    with pytest.raises(ValueError):
        MailSettings(imap_host="h", username="u", password="x")  # no such key
