"""Synthetic turns for the memory benchmarks: deterministic, offline, sized at will.

The text follows a Zipf law over a vocabulary whose head is real English
function words and whose tail is pronounceable made-up words, so full-text
queries meet the same mix of very common and rare terms as in a real store.
`english_vocabulary` draws real English words at the frequencies `wordfreq`
measured instead, for benchmarks whose queries are real English questions
(made-up words would never collide with them; real ones do, as in use).
The kinds of turn and their lengths imitate an agent's history: short user
messages, longer replies, tool calls with JSON arguments, tool results of
every size (a few large enough to be compressed), events and notes.

Both `turn_store.py` and `search_scale.py` build the same database with
`ensure_store`, which reuses a database already built under bench/out/.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import sys
import tempfile
import time
from bisect import bisect
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))

from noema.memory.store import TurnStore  # noqa: E402
from noema.memory.turns import NewTurn, TurnKind  # noqa: E402

OUT = ROOT / "out"

# The most frequent words of English prose head the distribution, as they do
# in any real conversation log.
FUNCTION_WORDS = (
    "the of and to a in is it you that he was for on are with as i his they be at one "
    "have this from or had by not but what some we can out other were all there when up "
    "use your how said an each she which do their if will way about many then them would "
    "so these her him has more could go come did my no most who over know than call "
    "first may down been now find any new work part take get made after back only just "
    "where me our very through also well"
).split()

TOOLS = ("read_file", "grep", "run_command", "web_fetch", "search_full_history",
         "write_file", "list_mail", "get_current_time")

_ONSETS = ("b", "br", "c", "ch", "d", "f", "g", "gr", "h", "j", "k", "l", "m", "n", "p",
           "pl", "qu", "r", "s", "st", "t", "tr", "v", "w", "z")
_NUCLEI = ("a", "e", "i", "o", "u", "ai", "ea", "io", "ou")
_CODAS = ("", "", "n", "r", "s", "l", "m", "nd", "st", "x")


class Vocabulary:
    """Words with Zipf-distributed frequencies, reproducible from a seed."""

    def __init__(self, size: int = 40_000, exponent: float = 1.07, seed: int = 11) -> None:
        rng = random.Random(seed)
        made: list[str] = []
        seen = set(FUNCTION_WORDS)
        while len(made) < size - len(FUNCTION_WORDS):
            syllables = rng.choice((2, 2, 3, 3, 4))
            word = "".join(
                rng.choice(_ONSETS) + rng.choice(_NUCLEI) + rng.choice(_CODAS)
                for _ in range(syllables)
            )
            if word not in seen:
                seen.add(word)
                made.append(word)
        self.words = list(FUNCTION_WORDS) + made
        self.cumulative = list(
            itertools.accumulate(1.0 / (rank + 1) ** exponent for rank in range(len(self.words)))
        )
        self.first_content = len(FUNCTION_WORDS)

    def sample(self, rng: random.Random, k: int) -> list[str]:
        return rng.choices(self.words, cum_weights=self.cumulative, k=k)

    def content_words(self, rng: random.Random, k: int, *, skip_head: int = 200) -> list[str]:
        """Words below the function words and the very frequent head, Zipf-weighted."""
        low = self.first_content + skip_head
        total = self.cumulative[-1]
        floor = self.cumulative[low - 1]
        picks = []
        for _ in range(k):
            index = bisect(self.cumulative, floor + rng.random() * (total - floor))
            picks.append(self.words[min(index, len(self.words) - 1)])
        return picks


class EnglishVocabulary(Vocabulary):
    """The most frequent English words, drawn at their frequencies in real text.

    Words are drawn a million at a time with numpy (a history of a million
    turns holds about a hundred million words); each batch is seeded from the
    caller's generator, so a seed still gives the same history.
    """

    BATCH = 1 << 20

    def __init__(self, size: int = 40_000) -> None:
        import numpy  # bench-only packages: wordfreq's word lists ship in its wheel
        import wordfreq

        self.words = [w for w in wordfreq.top_n_list("en", size) if w.isalpha()]
        frequencies = [wordfreq.word_frequency(w, "en") for w in self.words]
        self.cumulative = list(itertools.accumulate(frequencies))
        self.first_content = len(FUNCTION_WORDS)
        self._numpy = numpy
        self._shares = numpy.array(frequencies) / sum(frequencies)
        self._drawn: list[str] = []
        self._next = 0

    def sample(self, rng: random.Random, k: int) -> list[str]:
        if self._next + k > len(self._drawn):
            draw = self._numpy.random.default_rng(rng.getrandbits(64))
            picks = draw.choice(len(self.words), size=max(self.BATCH, k), p=self._shares)
            self._drawn = [self.words[i] for i in picks.tolist()]
            self._next = 0
        start, self._next = self._next, self._next + k
        return self._drawn[start : self._next]


@functools.cache
def english_vocabulary() -> EnglishVocabulary:
    """Real English at real frequencies, made once per process."""
    return EnglishVocabulary()


# First names for the people of a synthetic history; a few write most of the
# turns (the agent's person, a close colleague), the rest now and then.
PEOPLE = (
    "Alex Sam Maria David Laura Daniel Sarah Michael Emma James Olivia John Sofia Peter "
    "Anna Thomas Lucy Robert Julia Mark Elena Paul Clara Chris Nina Tom Rosa Kevin Alice "
    "Brian Irene Steve Helen Martin Eva Diego Grace Ivan Hannah Omar Chloe Victor Leah Ryan"
).split()


def _people_weights(count: int) -> list[float]:
    return list(itertools.accumulate(1.0 / (rank + 1) ** 1.2 for rank in range(count)))


@functools.cache
def default_vocabulary() -> Vocabulary:
    """The vocabulary every benchmark shares: made once per process, it takes a second."""
    return Vocabulary()


def _sentence(vocab: Vocabulary, rng: random.Random, words: int) -> str:
    chosen = vocab.sample(rng, words)
    if rng.random() < 0.3:  # now and then a proper noun, as people name things
        chosen[rng.randrange(len(chosen))] = rng.choice(vocab.words[2000:6000]).capitalize()
    text = " ".join(chosen)
    return text[:1].upper() + text[1:] + rng.choice((".", ".", ".", "?", "!"))


def _prose(vocab: Vocabulary, rng: random.Random, words: int) -> str:
    sentences = []
    while words > 0:
        length = min(words, rng.randint(6, 22))
        sentences.append(_sentence(vocab, rng, length))
        words -= length
    return " ".join(sentences)


def synthetic_turns(
    count: int, *, seed: int = 7, vocab: Vocabulary | None = None, people: bool = False
) -> Iterator[NewTurn]:
    """`count` turns in the order an agent would write them. With `people`, the
    person's messages and delivered events carry a sender drawn from PEOPLE,
    as a multi-person agent's would."""
    vocab = vocab or default_vocabulary()
    rng = random.Random(seed)
    weights = _people_weights(len(PEOPLE))

    def sender() -> str | None:
        return rng.choices(PEOPLE, cum_weights=weights)[0] if people else None

    call_number = 0
    pending_call: tuple[str, str] | None = None
    for _ in range(count):
        if pending_call is not None:  # a tool call is always answered next
            name, call_id = pending_call
            pending_call = None
            roll = rng.random()
            size = 4000 if roll < 0.02 else rng.randint(20, 300)
            yield NewTurn(TurnKind.TOOL_RESULT, _prose(vocab, rng, size),
                          tool_name=name, call_id=call_id)
            continue
        roll = rng.random()
        if roll < 0.27:
            yield NewTurn(TurnKind.USER, _prose(vocab, rng, rng.randint(4, 40)),
                          channel="terminal", sender=sender())
        elif roll < 0.60:
            yield NewTurn(TurnKind.ASSISTANT, _prose(vocab, rng, rng.randint(15, 140)))
        elif roll < 0.93:
            call_number += 1
            name = rng.choice(TOOLS)
            call_id = f"call_{call_number}"
            pending_call = (name, call_id)
            arguments = json.dumps({"query": " ".join(vocab.content_words(rng, 3))})
            yield NewTurn(TurnKind.TOOL_CALL, tool_name=name, call_id=call_id,
                          arguments=arguments)
        elif roll < 0.97:
            call_number += 1
            yield NewTurn(TurnKind.EVENT, _prose(vocab, rng, rng.randint(10, 60)),
                          tool_name="pool_event", call_id=f"event_{call_number}", sender=sender())
        else:
            yield NewTurn(TurnKind.NOTE, _prose(vocab, rng, rng.randint(8, 30)))


def sample_queries(count: int, *, seed: int = 99, vocab: Vocabulary | None = None) -> list[str]:
    """Questions a person might put to the history: a few content words in a phrase."""
    vocab = vocab or default_vocabulary()
    rng = random.Random(seed)
    frames = ("what did we say about {}", "{}", "the {} thing", "when did I mention {}",
              "find {}", "{} again")
    queries = []
    for _ in range(count):
        words = " ".join(vocab.content_words(rng, rng.randint(1, 4), skip_head=rng.choice((0, 50, 400))))
        queries.append(rng.choice(frames).format(words))
    return queries


def build_store(path: Path, count: int, *, seed: int = 7, batch: int = 20_000) -> None:
    """Write `count` synthetic turns to a new store at `path`."""
    store = TurnStore(path)
    turns = synthetic_turns(count, seed=seed)
    started = time.perf_counter()
    written = 0
    while written < count:
        with store.transaction():
            for new in itertools.islice(turns, batch):
                store.append(new)
                written += 1
        rate = written / (time.perf_counter() - started)
        print(f"  built {written:>9,} turns ({rate:,.0f}/s)", file=sys.stderr)
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()


def ensure_store(count: int, *, seed: int = 7, folder: Path = OUT) -> Path:
    """The path of a store holding `count` synthetic turns, built once into
    `folder` and reused."""
    folder.mkdir(exist_ok=True)
    path = folder / f"synthetic_{count}_{seed}.db"
    marker = path.with_suffix(".done")
    if not marker.exists():
        for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            stale.unlink(missing_ok=True)
        print(f"building {path} ({count:,} turns), once...", file=sys.stderr)
        build_store(path, count, seed=seed)
        marker.write_text("complete\n")
    return path


SMOKE_SIZE = 1_000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="Build (once) a store of synthetic turns.")
    parser.add_argument("size", nargs="?", type=int, default=100_000)
    parser.add_argument("--smoke", action="store_true",
                        help=f"build {SMOKE_SIZE:,} turns in a scratch folder and report the rate")
    args = parser.parse_args(argv)
    if not args.smoke:
        print(ensure_store(args.size))
        return 0
    with tempfile.TemporaryDirectory(prefix="noema-synthetic-") as scratch:
        started = time.perf_counter()
        path = ensure_store(SMOKE_SIZE, folder=Path(scratch))
        elapsed = time.perf_counter() - started
        size = path.stat().st_size
    print(f"built {SMOKE_SIZE:,} synthetic turns in {elapsed:.2f} s "
          f"({SMOKE_SIZE / elapsed:,.0f} turns/s, {size / SMOKE_SIZE:,.0f} bytes/turn)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
