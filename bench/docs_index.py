"""The document library at 1,000 documents: indexing throughput, search
latency, and a second pass over an unchanged corpus.

    .venv/bin/python bench/docs_index.py [--documents N] [--queries N]
    .venv/bin/python bench/docs_index.py --smoke        (60 documents, 30 queries)

The corpus is written first, in a scratch folder, by the same writers the
tests use: an even mix of Markdown, text, HTML, DOCX, ODT and PDF (half the
PDFs with an outline, half without), 4 to 12 sections each, real English
words at their real frequencies (`synthetic.english_vocabulary`). Then:

- indexing from empty, in pages per second (a PDF page is a page; other
  formats count one page per 3,000 characters, as `docs.indexer.page_count`);
- `document_search` p50/p95 over queries of one to three words (target:
  p95 <= 20 ms), through the real tool and registry, as the model calls it;
- a second pass over the unchanged corpus (target: <= 2 s), and a pass
  after every file was touched (read and hashed, nothing parsed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from synthetic import english_vocabulary

from noema.docs import samples
from noema.docs.indexer import Status
from noema.docs.settings import DocsSettings
from noema.docs.tools import build_docs_tools
from noema.docs.store import index_file
from noema.paths import AgentPaths
from noema.providers.base import ToolCall
from noema.security.policy import AccessPolicy, Root, real
from noema.security.settings import DEFAULT_DENY
from noema.tools.registry import ToolContext, ToolRegistry

FORMATS = (".md", ".txt", ".html", ".docx", ".odt", ".pdf")
SEED = 14


def percentile(samples: Sequence[float], share: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def write_corpus(folder: Path, count: int, rng: random.Random) -> None:
    vocabulary = english_vocabulary()
    for n in range(count):
        suffix = FORMATS[n % len(FORMATS)]
        sections = []
        for s in range(rng.randint(4, 12)):
            level = 1 if s == 0 else rng.choice((1, 2, 2, 3))
            heading = f"{s + 1} " + " ".join(vocabulary.sample(rng, rng.randint(1, 4)))
            paragraphs = [" ".join(vocabulary.sample(rng, rng.randint(40, 90))) + "."
                          for _ in range(rng.randint(2, 5))]
            sections.append((level, heading, paragraphs))
        title = " ".join(vocabulary.sample(rng, 3)).capitalize()
        sub = folder / f"shelf{n % 10}"
        sub.mkdir(exist_ok=True)
        path = sub / f"doc{n:04d}{suffix}"
        if suffix == ".pdf":
            samples.write_pdf(path, title, sections, outline=n % 12 < 6)
        else:
            samples.WRITERS[suffix](path, title, sections)


def queries(count: int, rng: random.Random) -> list[str]:
    vocabulary = english_vocabulary()
    # Content words (past the function words) make queries a person would type.
    content = vocabulary.words[vocabulary.first_content: vocabulary.first_content + 5000]
    return [" ".join(rng.sample(content, rng.randint(1, 3))) for _ in range(count)]


def bench(documents: int, query_count: int, scratch: Path) -> None:
    rng = random.Random(SEED)
    root = scratch / "root"
    folder = root / "library"
    folder.mkdir(parents=True)
    started = time.perf_counter()
    write_corpus(folder, documents, rng)
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    print(f"corpus: {documents:,} documents, {size / 1e6:.1f} MB, written in "
          f"{time.perf_counter() - started:.1f} s")

    paths = AgentPaths.for_agent("bench", scratch / "home")
    policy = AccessPolicy([Root(real(root), False)], DEFAULT_DENY, (paths.agents_dir,))
    docs = build_docs_tools(DocsSettings(folders=[str(folder)]), policy, paths)
    assert docs is not None
    library = docs.library
    try:
        started = time.perf_counter()
        report = library.index()
        took = time.perf_counter() - started
        failed = report.count(Status.FAILED)
        print(f"index from empty: {took:.2f} s, {report.pages:,} pages, "
              f"{report.pages / took:,.0f} pages/s, {documents / took:,.0f} docs/s "
              f"({failed} failed)")
        docs_count, sections = library.store.counts()
        print(f"  index holds {docs_count:,} documents in {sections:,} sections; "
              f"file {os.path.getsize(index_file(paths)) / 1e6:.1f} MB")

        registry = ToolRegistry(docs.tools)
        asked = queries(query_count, rng)
        latencies = asyncio.run(search_latencies(registry, asked))
        ms = [s * 1000 for s in latencies]
        print(f"document_search over {len(asked)} queries: p50 {percentile(ms, 0.5):.2f} ms, "
              f"p95 {percentile(ms, 0.95):.2f} ms, max {max(ms):.2f} ms wall "
              "(target p95 <= 20 ms)")
        # The tool's wall time includes waiting for a core; on a shared machine
        # the CPU time of the search itself says what the index costs.
        cpu = []
        for query in asked:
            started = time.thread_time()
            library.store.search(query, 8)
            cpu.append((time.thread_time() - started) * 1000)
        print(f"  the search alone, CPU time: p50 {percentile(cpu, 0.5):.2f} ms, "
              f"p95 {percentile(cpu, 0.95):.2f} ms")

        started = time.perf_counter()
        again = library.index()
        took = time.perf_counter() - started
        print(f"reindex unchanged: {took:.3f} s ({again.count(Status.UNCHANGED):,} unchanged, "
              f"{again.count(Status.NEW) + again.count(Status.CHANGED)} parsed; "
              "target <= 2 s)")

        bump = time.time_ns() + 10_000_000_000
        for path in folder.rglob("*"):
            if path.is_file():
                os.utime(path, ns=(bump, bump))
        started = time.perf_counter()
        touched = library.index()
        took = time.perf_counter() - started
        print(f"reindex after touching every file: {took:.3f} s (read and hashed, "
              f"{touched.count(Status.NEW) + touched.count(Status.CHANGED)} parsed)")
    finally:
        library.close()


async def search_latencies(registry: ToolRegistry, asked: list[str]) -> list[float]:
    ctx = ToolContext("bench", 1, 1)
    await registry.call(ToolCall("w", "document_search", json.dumps({"query": "warm"})), ctx)
    out = []
    for query in asked:
        call = ToolCall("q", "document_search", json.dumps({"query": query}))
        started = time.perf_counter()
        result = await registry.call(call, ctx)
        out.append(time.perf_counter() - started)
        assert not result.is_error, result.content
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--documents", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--smoke", action="store_true", help="60 documents, 30 queries")
    args = parser.parse_args(argv)
    documents, query_count = (60, 30) if args.smoke else (args.documents, args.queries)
    with tempfile.TemporaryDirectory(prefix="noema-docs-bench-") as scratch:
        bench(documents, query_count, Path(scratch))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
