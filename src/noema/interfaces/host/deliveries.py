"""A delivered pool_event read back into its parts, for the chats to show apart:
which channels spoke, each package's lines before and after its gap, and
where in the archive the gap's events are.

The text is the one the model read (`perception.packing.render_pool_event`).
Its envelope marks carry the session's random token and outside text never
holds a bracket, so a mark is found without knowing the token. What does not
read as a delivery (an older format, a cut text) is shown as it is.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from ...perception.untrusted import CLOSE, DEFAULT_MARKER, OPEN

_MARK = re.compile(f"{OPEN}(/?)(\\w+) [0-9a-f]{{8,32}}([^{CLOSE}]*){CLOSE}")
_ATTRIBUTE = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')  # an outside value is quoted
# "… 10 more: batch b3 offsets 2–11; not archived (lookup_sensory_archive)"
_GAP = re.compile(r"^… (\d+) ([^:]+): (.+?)(?: \(lookup_sensory_archive\))?$")
_PLACE = re.compile(r"^batch (b\d{1,18}) offsets (\d+)–(\d+)$")


@dataclass(frozen=True, slots=True)
class Place:
    """Where some of a gap's events are: a batch and its offsets, or nowhere."""

    batch: str | None
    first: int | None = None
    last: int | None = None


@dataclass(frozen=True, slots=True)
class Gap:
    """The events a package left out, between its head and its tail."""

    count: int
    what: str  # "more", "older values replaced by this one"…
    places: list[Place]


@dataclass(slots=True)
class Package:
    """One channel's package: its attributes, then head, gap, tail."""

    channel: str
    nature: str = ""
    sender: str = ""
    authorised: bool = False
    head: list[str] = field(default_factory=list)
    gap: Gap | None = None
    tail: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Delivery:
    """A pool_event as the page shows it."""

    when: str
    packages: list[Package]

    @property
    def channels(self) -> list[str]:
        return list(dict.fromkeys(p.channel for p in self.packages))

    @property
    def batches(self) -> list[str]:
        return list(dict.fromkeys(place.batch for p in self.packages if p.gap
                                  for place in p.gap.places if place.batch))


def read_delivery(text: str) -> Delivery | None:
    """The parts of a delivered pool_event, or None when `text` is not one."""
    lines = text.split("\n")
    first = _MARK.match(lines[0]) if lines else None
    if first is None or first.group(1) or first.group(2) != "pool_event":
        return None
    when = first.group(3).split(" · ", 1)[1].strip() if " · " in first.group(3) else ""
    packages: list[Package] = []
    current: Package | None = None
    for line in lines[1:]:
        mark = _MARK.fullmatch(line)
        if mark is not None and mark.group(2) == "event":
            if mark.group(1):  # the package's close
                current = None
            else:
                attributes = dict(_ATTRIBUTE.findall(mark.group(3)))
                current = Package(channel=attributes.get("channel", "?"),
                                  nature=attributes.get("nature", ""),
                                  sender=_unquote(attributes.get("sender", "")),
                                  authorised=attributes.get("authorised") == "yes")
                packages.append(current)
            continue
        if current is None:
            continue  # the preamble on outside content, or the closing mark
        gap = _gap(line)
        if gap is not None and current.gap is None:
            current.gap = gap
        elif current.gap is None:
            current.head.append(_plain(line))
        else:
            current.tail.append(_plain(line))
    return Delivery(when, packages) if packages else None


def delivery_json(text: str) -> dict[str, Any] | None:
    """`read_delivery` as JSON for the page (every value is text to show as text)."""
    delivery = read_delivery(text)
    if delivery is None:
        return None
    return {"when": delivery.when, "channels": delivery.channels, "batches": delivery.batches,
            "packages": [asdict(p) for p in delivery.packages]}


def _gap(line: str) -> Gap | None:
    found = _GAP.match(line)
    if found is None:
        return None
    places = []
    for part in found.group(3).split("; "):
        place = _PLACE.match(part)
        if place is not None:
            places.append(Place(place.group(1), int(place.group(2)), int(place.group(3))))
        elif part == "not archived":
            places.append(Place(None))
        else:
            return None  # not a gap line after all: an event's own text
    return Gap(int(found.group(1)), found.group(2), places)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = re.sub(r"\\(.)", r"\1", value[1:-1])
    return _plain(value)


def _plain(text: str) -> str:
    # The datamark stands for the spaces of outside text; the page shows spaces.
    return text.replace(DEFAULT_MARKER, " ")
