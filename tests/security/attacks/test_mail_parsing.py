"""Class 9 of the second round: mail parsing with bounds.

A hostile mail tries to exhaust the reader: megabytes of attachment, a To
line of 20,000 recipients, MIME nested 1,000 deep, a subject and attachment
list long enough to push the rest of an event out of sight. The verdicts
are evidence: the peak of memory the reading allocated (tracemalloc), the
sender and subject still found, the line that says how to read the mail
still in the event. Before the one-pass reader, the nested mail raised
RecursionError and lost its sender, and 20,000 recipients were parsed whole.
"""

from __future__ import annotations

import io
import tracemalloc

from noema.channels.mail.authresults import Verdict
from noema.channels.mail.intake import header_line
from noema.channels.mail.message import MAX_DEPTH, read_mail, scan
from noema.channels.mail.sensor import stranger_text

from ...mail.conftest import mail
from ...mail.test_reading import big_mail, nested

STRANGER = Verdict(False, False, "not one of the person's addresses")


def test_mime_nested_a_thousand_deep_keeps_its_sender_and_subject_and_says_so():
    found = read_mail(9, nested(1000))
    assert found.from_address == "deep@outside.test" and found.subject == "nested deep"
    assert any(f"deeper than {MAX_DEPTH}" in note for note in found.notes)
    # Within the bound the text is found as before.
    assert read_mail(9, nested(5)).text == "deep text"


def test_twenty_thousand_recipients_are_kept_in_part_and_counted():
    to = ", ".join(f"user{n}@many.test" for n in range(20_000))
    raw = f"From: a@outside.test\r\nTo: {to}\r\nSubject: many\r\n\r\nbody\r\n".encode()
    tracemalloc.start()
    try:
        found = read_mail(1, raw)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.subject == "many" and found.text == "body"
    assert 0 < len(found.to) <= 200 and len(found.to) + found.to_more == 20_000
    assert peak < 20 * 1024 * 1024  # the 440 KB header, not hundreds of MB of parse trees
    line = header_line(found, "INBOX", 1)
    assert "and 19980 more" in line and len(line) < 2000


def test_a_big_mail_streams_by_without_being_held():
    raw = big_mail(30)
    source = io.BytesIO(raw)
    tracemalloc.start()
    try:
        found = scan(4, source, len(raw)).mail
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert found.text == "see the archive"
    [archive] = found.attachments
    assert archive.name == "archive.bin" and archive.size == 30 * 1024 * 1024
    assert peak < 8 * 1024 * 1024  # lines stream past; the 40 MB of base64 are never held


def test_a_long_subject_and_500_attachment_names_leave_how_to_read_it_in_the_event():
    message = mail("Spam <spam@outside.test>", "agent@noema.test", "S" * 2800, "body",
                   attachments=tuple((f"file-{n:03}.txt", "text/plain", b"x")
                                     for n in range(500)))
    found = read_mail(77, message.as_bytes())
    assert len(found.attachments) == 500
    text = stranger_text(found, STRANGER, 400, True)
    assert "email_read(uid=77)" in text.split("\n")[1]
    assert "and 490 more" in text and "(2500 more characters)" in text
    assert len(text) < 2500
