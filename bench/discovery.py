"""``python -m bench.discovery``: how well ``reconciler suggest`` finds the versions nobody
declared, on labelled corpora, and what it costs.

For each corpus a deployment is built in a temporary folder (a vault, a SQLite table whose
rows are registered from the vault's scan as an inherited corpus has them: each document its
own family, state ``unknown``, nothing declared) and ``suggest`` runs once over it. The labels
are read here, never by the code under test, and never reach the files it reads:

- ``demo``: the handbook of ``reconciler demo``, written with its ``family``, ``version``,
  ``status`` and ``superseded_by`` left out; labels: its ``REPLACEMENTS``;
- ``peps``: the real PEPs of ``examples/peps/head`` (or ``--peps DIR ...``: whole clones, e.g.
  at other points of their history; one row each, ``peps:<folder name>``), copied with their
  ``Status``, ``Superseded-By`` and ``Replaces`` header lines stripped; labels: those headers,
  by ``bench.peps.PepLabels`` (a plain line reader);
- ``synthetic-N``: generated families of 1 to 4 versions told apart by the markers people use
  (``-2024``, ``-v2``, ``_old``, ``archive/``, ``(superseded)``), bodies edited from version
  to version, and look-alike distractors (a shared word, another product code).

Prints one row per corpus: links proposed, precision and recall at the default threshold,
direction accuracy, family purity, seconds and peak RSS of ``suggest``, then the
precision-recall curve (one point per threshold), then every link proposed at the default
threshold that the labels lack, with its evidence.

    .venv/bin/python -m bench.discovery                      # demo, peps, synthetic 1k and 10k
    .venv/bin/python -m bench.discovery --sizes 1000 10000 100000 --peps /tmp/peps
    .venv/bin/python -m bench.discovery --only peps --peps /tmp/peps /tmp/peps-2018
"""

from __future__ import annotations

import argparse
import random
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import memory
from bench.peps import PepLabels

ROOT = Path(__file__).resolve().parent.parent
PEPS = ROOT / "examples" / "peps" / "head"
CURVE = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
STRIPPED_HEADERS = ("Status:", "Superseded-By:", "Replaces:")

Pair = frozenset[str]


@dataclass(frozen=True)
class Corpus:
    """A built corpus: its config, and the labelled links (older, newer)."""

    name: str
    config: Path
    links: frozenset[tuple[str, str]]


# -- building -------------------------------------------------------------------------------


CONFIG = """\
[table]
url = "sqlite:///reconciler.db"

[index]
path = "qdrant"
collection = "corpus"

[[sources]]
name = "{source}"
type = "vault"
path = "vault"
trigger = "polling"
ttl = "24h"
{options}
"""


def deploy(folder: Path, source: str, options: str = "") -> Path:
    """A config over ``folder/vault``, and its table initialised with the vault's documents
    registered as an inherited corpus has them (one family each, ``unknown``)."""
    from reconciler.app.wiring import build_sources, open_table  # noqa: PLC0415
    from reconciler.model import Document, VersionState  # noqa: PLC0415
    from reconciler.settings import load_settings  # noqa: PLC0415

    config = folder / "reconciler.toml"
    config.write_text(CONFIG.format(source=source, options=options), encoding="utf-8")
    settings = load_settings(config)
    (connector,) = build_sources(settings)
    snapshot = connector.scan()
    table = open_table(settings, create=True)
    try:
        table.upsert_documents(
            Document(
                doc_id=d.doc_id,
                source=d.source,
                source_key=d.source_key,
                doc_family_id=d.family or d.doc_id,
                doc_version=d.version or 1,
                version_state=VersionState.UNKNOWN,
                effective_from=d.effective_from,
                doc_class=d.doc_class,
                title=d.title,
                source_hash=d.content_hash,
            )
            for d in snapshot.documents
        )
    finally:
        table.close()
    return config


def demo_corpus(folder: Path) -> Corpus:
    """The demo handbook with nothing declared."""
    from reconciler.app.demo import NOTES, REPLACEMENTS, SOURCE  # noqa: PLC0415

    for note in NOTES:
        front = {k: v for k, v in note.front.items() if k not in {"family", "version", "status"}}
        target = folder / "vault" / note.path
        target.parent.mkdir(parents=True, exist_ok=True)
        head = "---\n" + "".join(f"{k}: {v}\n" for k, v in front.items()) + "---\n"
        target.write_text(head + note.body, encoding="utf-8")
    ids = {note.path: note.front["id"] for note in NOTES}
    links = frozenset(
        (f"{SOURCE}:{ids[path]}", f"{SOURCE}:{change['superseded_by']}")
        for path, change in REPLACEMENTS.items()
        if "superseded_by" in change
    )
    return Corpus("demo", deploy(folder, SOURCE), links)


PEP_OPTIONS = """
[sources.options]
include = ["peps/pep-*.rst", "pep-*.txt", "pep-*.rst"]
exclude = ["peps/pep-0000.rst", "pep-0000.txt"]
readers = ["headers"]
id_template = "pep-{:04d}"
date_formats = ["%d-%b-%Y", "%d-%B-%Y", "%d %b %Y", "%d %B %Y"]
status_default = "unknown"

[sources.options.fields]
id = "PEP"
title = "Title"
effective_from = "Created"
doc_class = "Type"
version = []
"""


def peps_corpus(folder: Path, checkout: Path, name: str = "peps") -> Corpus:
    """The PEPs of ``checkout`` with their supersession headers stripped."""
    labels = PepLabels.of(checkout)
    for path in [*checkout.glob("peps/pep-*"), *checkout.glob("pep-*")]:
        if path.suffix not in {".rst", ".txt"}:
            continue
        target = folder / "vault" / path.relative_to(checkout)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(strip_headers(path.read_text(encoding="utf-8")), encoding="utf-8")
    links = frozenset(
        (f"peps:pep-{old:04d}", f"peps:pep-{new:04d}")
        for old, news in labels.successors.items()
        for new in news
    )
    return Corpus(name, deploy(folder, "peps", PEP_OPTIONS), links)


def strip_headers(text: str) -> str:
    """A PEP without its Status, Superseded-By and Replaces lines (and their continuations)."""
    out, dropping, in_head = [], False, True
    for line in text.splitlines(keepends=True):
        if in_head and not line.strip():
            in_head = False
        if in_head and line[:1] in {" ", "\t"} and dropping:
            continue
        dropping = in_head and line.startswith(STRIPPED_HEADERS)
        if not dropping:
            out.append(line)
    return "".join(out)


# -- synthetic ------------------------------------------------------------------------------

WORDS = [
    f"{a}{b}"
    for a in ("pol", "run", "gui", "man", "spe", "han", "pro", "ref", "not", "rep", "pla", "cha")
    for b in ("icy", "book", "de", "ual", "cs", "dbook", "cess", "erence", "es", "ort", "n", "rt",
              "ure", "ine", "ary", "ion", "ent", "ity", "ism", "ery")
]  # fmt: skip
TOPICS = [f"topic{n}" for n in range(400)]
MARKERS = ("year", "v", "old", "archive", "superseded")


@dataclass(frozen=True)
class Synthetic:
    """One generated document."""

    doc_id: str
    path: str
    title: str
    date: str
    body: str


def synthetic_documents(size: int, *, seed: int = 7) -> Iterator[tuple[Synthetic, str | None]]:
    """``size`` documents (families of 1 to 4 versions, look-alike others), one at a time,
    each with the doc id of the version it replaces (None for a first version)."""
    rng = random.Random(seed)
    made = 0
    family = 0
    while made < size:
        family += 1
        versions = min(rng.choice((1, 1, 2, 2, 3, 4)), size - made)
        name = [rng.choice(WORDS), rng.choice(WORDS), rng.choice(TOPICS), f"f{family}"]
        marker = rng.choice(MARKERS)
        body = [rng.choice(WORDS + TOPICS) for _ in range(rng.randint(60, 200))]
        previous = None
        for v in range(versions):
            doc = _synthetic_doc(family, v, versions, name, marker, body, rng)
            yield doc, previous
            previous = f"synth:{doc.doc_id}"
            body = [w if rng.random() > 0.15 else rng.choice(WORDS) for w in body]
        made += versions


def synthetic_corpus(folder: Path, size: int) -> Corpus:
    """The generated documents written to a vault and registered."""
    links = set()
    for doc, previous in synthetic_documents(size):
        if previous is not None:
            links.add((previous, f"synth:{doc.doc_id}"))
        target = folder / "vault" / doc.path
        target.parent.mkdir(parents=True, exist_ok=True)
        front = f"---\nid: {doc.doc_id}\ntitle: {doc.title}\n"
        front += f"effective_from: {doc.date}\n" if doc.date else ""
        target.write_text(front + "---\n" + doc.body + "\n", encoding="utf-8")
    return Corpus(f"synthetic-{size}", deploy(folder, "synth"), frozenset(links))


def _synthetic_doc(
    family: int,
    v: int,
    versions: int,
    name: list[str],
    marker: str,
    body: list[str],
    rng: random.Random,
) -> Synthetic:
    year = 2020 + v
    last = v == versions - 1
    stem = "-".join(name)
    title = " ".join(name).title()
    folder = "docs"
    if marker == "year":
        stem, title = f"{stem}-{year}", f"{title} {year}"
    elif marker == "v":
        stem, title = f"{stem}-v{v + 1}", f"{title} v{v + 1}"
    elif not last and marker == "old":
        stem = f"{stem}_old" if v == versions - 2 else f"{stem}_old_{year}"
    elif not last and marker == "archive":
        folder = f"archive/{year}"
    elif not last and marker == "superseded":
        title = f"{title} (superseded)"
        stem = f"{stem}-{rng.randint(100, 999)}"
    date = f"{year}-0{rng.randint(1, 9)}-01" if rng.random() < 0.7 else ""
    return Synthetic(f"f{family}-{v}", f"{folder}/{stem}.md", title, date, " ".join(body))


def core(size: int) -> dict[str, Any]:
    """``discover`` alone over ``size`` generated documents held in memory (no table, no
    source): the profiles built one by one, then blocking, scoring and the proposals."""
    from datetime import UTC, datetime  # noqa: PLC0415

    from reconciler.discovery import DEFAULT_MIN_SCORE, discover, profile  # noqa: PLC0415

    links = set()
    memory.reset_peak()
    started = time.perf_counter()
    profiles = []
    for doc, previous in synthetic_documents(size):  # streamed: no body is kept
        if previous is not None:
            links.add((previous, f"synth:{doc.doc_id}"))
        profiles.append(
            profile(
                doc_id=f"synth:{doc.doc_id}",
                source="synth",
                family=f"synth:{doc.doc_id}",
                doc_class=None,
                title=doc.title,
                path=doc.path,
                effective_from=datetime.fromisoformat(doc.date).replace(tzinfo=UTC)
                if doc.date
                else None,
                body=doc.body,
            )
        )
    profiled = time.perf_counter() - started
    found = discover(profiles, min_score=DEFAULT_MIN_SCORE)
    seconds = time.perf_counter() - started
    precision, recall, proposed = _precision_recall(list(found.links), frozenset(links))
    return {
        "corpus": f"core-{size}",
        "documents": size,
        "labelled": len(links),
        "proposed": proposed,
        "precision": precision,
        "recall": recall,
        "profiles_s": round(profiled, 1),
        "seconds": round(seconds, 1),
        "peak_mib": round(memory.peak(), 1),
    }


# -- measuring ------------------------------------------------------------------------------


def evaluate(corpus: Corpus) -> dict[str, Any]:
    """Run ``suggest`` once (timed, peak RSS) and score it against the labels."""
    from reconciler.app.suggesting import suggest  # noqa: PLC0415
    from reconciler.discovery import DEFAULT_MIN_SCORE  # noqa: PLC0415
    from reconciler.discovery.proposals import build  # noqa: PLC0415
    from reconciler.discovery.scoring import Scored  # noqa: PLC0415
    from reconciler.settings import load_settings  # noqa: PLC0415

    settings = load_settings(corpus.config)
    memory.reset_peak()
    started = time.perf_counter()
    floor = min(CURVE)
    found = suggest(settings, min_score=floor)
    seconds = time.perf_counter() - started
    peak = memory.peak()
    # the curve: the links of one run at the curve's floor, kept at each threshold
    links = list(found.links)
    row: dict[str, Any] = {
        "corpus": corpus.name,
        "documents": found.documents,
        "labelled": len(corpus.links),
    }
    row |= {"seconds": round(seconds, 2), "peak_mib": round(peak, 1)}
    curve = []
    for threshold in CURVE:
        kept = [p for p in links if p.score >= threshold]
        curve.append((threshold, *_precision_recall(kept, corpus.links)))
    at_default = [p for p in links if p.score >= DEFAULT_MIN_SCORE]
    precision, recall, proposed = _precision_recall(at_default, corpus.links)
    row |= {"proposed": proposed, "precision": precision, "recall": recall}
    row |= {"direction": _direction(at_default, corpus.links)}
    families = build(
        _as_scored(at_default, Scored), min_score=DEFAULT_MIN_SCORE, documents=0
    ).families
    row |= {"purity": _purity([f.members for f in families], corpus.links)}
    row |= {
        "wrong": [
            f"{p.older} {p.direction} {p.newer}: {p.evidence}"
            for p in at_default
            if frozenset((p.older, p.newer)) not in _pairs(corpus.links)
        ]
    }
    row |= {"curve": curve}
    return row


def _as_scored(links: Iterable[Any], scored: Any) -> list[Any]:
    return [
        scored(
            a=p.older, b=p.newer, score=p.score, titles=None, paths=None, bodies=None,
            same_name=False, replacing=None,
            direction=(p.older, p.newer) if p.direction == "older -> newer" else None,
            evidence=p.evidence,
        )
        for p in links
    ]  # fmt: skip


def _pairs(links: Iterable[tuple[str, str]]) -> set[Pair]:
    return {frozenset(link) for link in links}


def _precision_recall(
    proposed: list[Any], labelled: frozenset[tuple[str, str]]
) -> tuple[float, float, int]:
    truth = _pairs(labelled)
    got = {frozenset((p.older, p.newer)) for p in proposed}
    right = len(got & truth)
    precision = right / len(got) if got else 1.0
    recall = right / len(truth) if truth else 1.0
    return round(precision, 3), round(recall, 3), len(got)


def _direction(proposed: list[Any], labelled: frozenset[tuple[str, str]]) -> str:
    truth = _pairs(labelled)
    right = [p for p in proposed if frozenset((p.older, p.newer)) in truth]
    directed = [p for p in right if p.direction == "older -> newer"]
    correct = sum((p.older, p.newer) in labelled for p in directed)
    return f"{correct}/{len(directed)} right, {len(right) - len(directed)} undirected"


def _purity(families: list[tuple[str, ...]], labelled: frozenset[tuple[str, str]]) -> float:
    """The share of the proposed families' members in the true family most of them are in."""
    parent: dict[str, str] = {}

    def root(x: str) -> str:
        while parent.setdefault(x, x) != x:
            x = parent[x]
        return x

    for a, b in labelled:
        parent[root(a)] = root(b)
    total = agreeing = 0
    for members in families:
        counts: dict[str, int] = {}
        for m in members:
            counts[root(m)] = counts.get(root(m), 0) + 1
        total += len(members)
        agreeing += max(counts.values())
    return round(agreeing / total, 3) if total else 1.0


def _table(rows: list[Mapping[str, Any]]) -> str:
    columns = ("corpus", "documents", "labelled", "proposed", "precision", "recall", "direction",
               "purity", "seconds", "peak_mib")  # fmt: skip
    lines = [" | ".join(columns), " | ".join("---" for _ in columns)]
    lines += [" | ".join(str(row[c]) for c in columns) for row in rows]
    lines.append("")
    lines.append("precision-recall curve (threshold: precision / recall / proposed)")
    for row in rows:
        points = "  ".join(f"{t}: {p}/{r}/{n}" for t, p, r, n in row["curve"])
        lines.append(f"{row['corpus']}: {points}")
    for row in rows:
        for wrong in row["wrong"]:
            lines.append(f"  not labelled ({row['corpus']}): {wrong}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1000, 10000])
    parser.add_argument(
        "--peps", type=Path, nargs="+", default=[PEPS], help="folders of PEPs or clones"
    )
    parser.add_argument("--only", nargs="*", help="corpora by name (demo, peps, synthetic-N)")
    parser.add_argument(
        "--core", type=int, nargs="*", default=[], help="sizes of the in-memory core run"
    )
    args = parser.parse_args(argv)
    for size in args.core:
        print(core(size), flush=True)
    if args.core and not args.only:
        return
    rows = []
    builders: list[tuple[str, Any]] = [("demo", demo_corpus)]
    for checkout in args.peps:
        name = "peps" if len(args.peps) == 1 else f"peps:{checkout.name}"
        builders.append((name, lambda f, c=checkout, n=name: peps_corpus(f, c, n)))
    builders += [(f"synthetic-{n}", lambda f, n=n: synthetic_corpus(f, n)) for n in args.sizes]
    for name, build_corpus in builders:
        if args.only and name.partition(":")[0] not in args.only and name not in args.only:
            continue
        folder = Path(tempfile.mkdtemp(prefix=f"bench-discovery-{name}-"))
        try:
            rows.append(evaluate(build_corpus(folder)))
            print(f"{name}: done", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(_table(rows))


if __name__ == "__main__":
    main()
