"""Reading hostile mail with bounds, and showing only what the person would see
(no server)."""

from __future__ import annotations

import email
import email.policy
import io
from email.message import EmailMessage
from email.policy import SMTP

import pytest

from noema.channels.mail import display
from noema.channels.mail.authresults import Verdict
from noema.channels.mail.html_text import html_to_text
from noema.channels.mail.message import (
    attachment_bytes,
    read_mail,
    save_attachment,
)
from noema.channels.mail.sensor import stranger_text

from .conftest import mail

STRANGER = Verdict(False, False, "not one of the person's addresses")


def nested(depth: int, inner: bytes = b"deep text") -> bytes:
    head = (b"From: Deep Sender <deep@outside.test>\r\nSubject: nested deep\r\n"
            b"MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"b0\"\r\n\r\n")
    body = b"".join(b"--b%d\r\nContent-Type: multipart/mixed; boundary=\"b%d\"\r\n\r\n"
                    % (i, i + 1) for i in range(depth))
    body += b"--b%d\r\nContent-Type: text/plain\r\n\r\n%s\r\n--b%d--\r\n" % (depth, inner, depth)
    body += b"".join(b"--b%d--\r\n" % i for i in range(depth - 1, -1, -1))
    return head + body


def big_mail(megabytes: int) -> bytes:
    message = EmailMessage(policy=SMTP)
    message["From"] = "Big <big@outside.test>"
    message["To"] = "agent@noema.test"
    message["Subject"] = "the big one"
    message.set_content("see the archive")
    message.add_attachment(b"\x07" * (megabytes * 1024 * 1024), maintype="application",
                           subtype="octet-stream", filename="archive.bin")
    return message.as_bytes()


def test_an_attachment_is_decoded_into_a_sink_piece_by_piece():
    raw = big_mail(3)
    pieces: list[int] = []
    total = bytearray()

    def sink(data: bytes) -> None:
        pieces.append(len(data))
        total.extend(data)

    info = save_attachment(io.BytesIO(raw), "archive.bin", sink)
    assert info is not None and info.size == len(total) == 3 * 1024 * 1024
    assert set(total) == {7} and max(pieces) < 64 * 1024
    assert save_attachment(io.BytesIO(raw), "nope", sink) is None


@pytest.mark.parametrize("encoding", ["base64", "quoted-printable", "7bit"])
def test_attachments_decode_like_the_standard_library(encoding):
    message = EmailMessage(policy=SMTP)
    message["From"] = "a@b.test"
    message.set_content("x")
    data = "line one = é\nline two\n" * 30
    message.add_attachment(data.encode("utf-8") if encoding != "7bit" else
                           data.replace("é", "e").encode(), maintype="text", subtype="plain",
                           filename="n.txt", cte=encoding)
    raw = message.as_bytes()
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    expected = next(parsed.iter_attachments()).get_payload(decode=True)
    assert attachment_bytes(raw, "n.txt")[1] == expected


def test_control_and_bidi_characters_are_shown_not_obeyed_or_hidden():
    message = mail("Eve\u202e <eve@outside.test>", "agent@noema.test",
                   "Invoice\u200b\u202egpj.exe", "x",
                   attachments=(("report\u202efdp.exe", "application/octet-stream", b"M"),))
    found = read_mail(3, message.as_bytes())
    text = stranger_text(found, STRANGER, 400, True)
    assert "\u202e" not in text and "\u200b" not in text
    assert "report<U+202E>fdp.exe" in text and "Invoice<U+200B><U+202E>gpj.exe" in text
    assert display.visible("a\nb\x1b[31m") == "a<U+000A>b<U+001B>[31m"


def test_look_alike_domains_are_shown_in_punycode_with_a_warning():
    shown = display.address("support@pаypal.com")  # a Cyrillic "а"
    assert shown.startswith("support@xn--") and display.LOOKALIKE in shown
    assert display.address("ana@example.org") == "ana@example.org"
    message = mail("PayPal <service@pаypal.com>", "agent@noema.test", "Your account", "x")
    text = stranger_text(read_mail(5, message.as_bytes()), STRANGER, 400, True)
    assert "pаypal" not in text and "xn--" in text and "imitate" in text


HIDDEN = [
    '<p style="display:none">SECRET</p>',
    '<p style="DISPLAY: NONE !important">SECRET</p>',
    '<style>.x{display:none}</style><p class="x">SECRET</p>',
    '<style>@media screen { div.y > span { visibility: hidden } }</style>'
    '<div class="y"><span>SECRET</span></div>',
    '<style>#z{font-size:0}</style><p id="z">SECRET</p>',
    '<span style="color:#ffffff">SECRET</span>',
    '<span style="color:rgb(254, 254, 254)">SECRET</span>',
    '<div style="background:#123456"><span style="color:#123456">SECRET</span></div>',
    '<table bgcolor="black"><tr><td><font color="#000">SECRET</font></td></tr></table>',
    '<div style="color:white"><p>SECRET</p></div>',
    '<p style="font-size:1px">SECRET</p>',
    '<p style="font-size:0.1em">SECRET</p>',
    '<p style="position:absolute; left:-9999px">SECRET</p>',
    '<p style="text-indent:-10000px">SECRET</p>',
    '<template><p>SECRET</p></template>',
    '<p hidden>SECRET</p>',
    '<span aria-hidden="true" style="font-size:4px">SECRET</span>',
    '<p style="opacity:0">SECRET</p>',
    '<div style="max-height:0;overflow:hidden">SECRET</div>',
    '<p style="color:transparent">SECRET</p>',
    '<p style="transform:scale(0)">SECRET</p>',
]


@pytest.mark.parametrize("hidden", HIDDEN)
def test_html_text_a_mail_client_hides_is_left_out_and_counted(hidden):
    text = html_to_text(f"<html><body><p>Hello Ana,</p>{hidden}<p>see you.</p></body></html>")
    assert "SECRET" not in text
    assert "Hello Ana," in text and "see you." in text
    assert "styled to be invisible" in text


@pytest.mark.parametrize("shown", [
    '<p style="color:#333">SHOWN</p>',
    '<div style="background:#000;color:#fff">SHOWN</div>',
    '<p style="font-size:12px">SHOWN</p>',
    '<style>.x{display:none}</style><p class="y">SHOWN</p>',
    '<p style="position:relative;left:10px">SHOWN</p>',
    '<span aria-hidden="true">SHOWN</span>',
])
def test_html_text_that_is_visible_stays(shown):
    text = html_to_text(f"<html><body>{shown}</body></html>")
    assert "SHOWN" in text and "invisible" not in text


# -- the one-pass reader against the standard library ------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

_PART = st.tuples(
    st.sampled_from(["base64", "quoted-printable", "7bit"]),
    st.integers(0, 3000),
    st.sampled_from([b"a", b"0123456789abcdef\n", b"--not a boundary\r\n", b"\x00\xff"]),
)


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(_PART, max_size=6), wrap=st.integers(0, 3),
       block=st.sampled_from([64, 257, 4096, 256 * 1024]))
def test_the_reader_finds_what_the_standard_library_finds(parts, wrap, block):
    from noema.channels.mail import message as reader

    message = EmailMessage(policy=SMTP)
    message["From"] = "a@b.test"
    message["Subject"] = "s"
    message.set_content("the text\nof the mail\n")
    for n, (encoding, length, unit) in enumerate(parts):
        data = (unit * (length // len(unit) + 1))[:length]
        if encoding == "7bit":
            data = bytes(c for c in data if 0 < c < 128 and c != 13).replace(b"\n", b"\r\n")
        message.add_attachment(data, maintype="application", subtype="octet-stream",
                               filename=f"f{n}.bin", cte=encoding)
    for level in range(wrap):  # the whole nested inside more multiparts
        outer = EmailMessage(policy=SMTP)
        outer["From"] = "a@b.test"
        outer["Subject"] = "s"
        outer["Content-Type"] = f'multipart/mixed; boundary="outer-{level}"'
        outer.set_payload([message])
        message = outer
    raw = message.as_bytes()
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    expected = [(p.get_filename(), len(p.get_payload(decode=True) or b""))
                for p in parsed.walk() if not p.is_multipart() and p.get_filename()]
    saved = reader.SKIM_BYTES
    reader.SKIM_BYTES = block
    try:
        found = read_mail(1, raw)
    finally:
        reader.SKIM_BYTES = saved
    assert [(a.name, a.size) for a in found.attachments] == expected
    assert found.text == "the text\nof the mail"


def test_a_style_sheet_too_large_to_check_leaves_the_text_out_and_says_why():
    from noema.channels.mail.html_text import MAX_RULES

    rules = "".join(f".c{n} {{ display: none }}\n" for n in range(MAX_RULES + 1))
    text = html_to_text(f"<html><head><style>{rules}</style></head><body>"
                        "<p class='c0'>SECRET</p><p>Hello</p></body></html>")
    assert "SECRET" not in text and "too many to check" in text
    # Rules that cannot hide anything do not count against the bound.
    harmless = "".join(f".c{n} {{ font-weight: bold }}\n" for n in range(MAX_RULES + 1))
    text = html_to_text(f"<html><head><style>{harmless}</style></head><body>"
                        "<p class='c0'>Hello</p></body></html>")
    assert "Hello" in text


def test_names_and_local_parts_that_pose_as_another_address_are_warned_about():
    assert display.LOOKALIKE_NAME in display.address("pаypal@example.org")
    posing = display.sender("service@paypal.com", "x@elsewhere.test")
    assert posing == f'x@elsewhere.test (name "service@paypal.com": {display.POSING})'
    honest = display.sender("ana@example.org", "ana@example.org")
    assert display.POSING not in honest
    assert display.sender("Ana", "ana@example.org") == 'ana@example.org (name "Ana")'
    assert display.sender("Ana", "") == '(no address) (name "Ana")'
    assert display.sender("", "ana@example.org") == "ana@example.org"
