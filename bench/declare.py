"""``python -m bench.declare``: how long ``reconciler declare FILE`` takes on a large reviewed
file, read as a file nobody vouches for (``reconciler.discovery.safe_yaml``: libyaml's parser,
the limits checked event by event, a pydantic schema).

It builds, in a temporary folder, an adopted corpus of 2 x N documents in a SQLite table (each
its own family, as ``bootstrap`` leaves an inherited corpus; no chunk points, so what is timed
is the declaring, not payload writes), and a proposals file of N accepted links (older ->
newer), written as ``suggest -o`` writes one (``Proposals.as_dict`` dumped as YAML). Then it
times, each in a fresh process:

- ``read``: ``from_file`` alone: the file read, checked and turned into decisions;
- ``declare``: the command ``reconciler declare FILE --force`` from spawn to exit (wall, and
  its CPU time: what compares on a loaded machine): the file
  read, every id checked against the table, the declarations recorded in one ``declare`` run
  that reconciles the N families it touches (guard weighed, audited);
- ``floor``: the same table writes as bare ``sqlite3`` ``executemany`` calls in one
  transaction, on a copy of the corpus: 2 x N row updates (N moved into their older's family,
  N marked superseded), N declarations, 3 x N audit entries and 3 x N findings, with values of
  the same sizes (no reading, no checking, no hashing): what the writes cost at the least.

    .venv/bin/python -m bench.declare                  # N = 100,000
    .venv/bin/python -m bench.declare --sizes 10000,100000

Its temporary folder is removed when it ends.
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from itertools import islice
from pathlib import Path

import yaml

from reconciler.discovery.proposals import DIRECTED, Proposal, Proposals
from reconciler.model import OPEN_END, Document, VersionState

ROOT = Path(__file__).resolve().parent.parent
EPOCH = datetime(2020, 1, 1, tzinfo=UTC)


def rows(n: int) -> list[Document]:
    """2 x n adopted rows: ``b:old-i`` and ``b:new-i``, each its own family, both current."""
    out = []
    for i in range(n):
        for version, name in ((1, f"old-{i}"), (2, f"new-{i}")):
            out.append(
                Document(
                    doc_id=f"b:{name}",
                    source="b",
                    source_key=name,
                    doc_family_id=f"b:{name}",
                    doc_version=1,
                    version_state=VersionState.CURRENT,
                    effective_from=EPOCH + timedelta(days=365 * (version - 1), minutes=i % 1000),
                    effective_to=OPEN_END,
                    superseded_by=None,
                    doc_class=None,
                    title=f"Policy {i}" + (" (old)" if version == 1 else ""),
                    source_hash=f"sha256:{i:032x}{version:032x}",
                    chunk_count=0,
                )
            )
    return out


def build(root: Path, n: int) -> tuple[Path, Path]:
    """The deployment (config, table, empty collection) and the reviewed file."""
    from reconciler.stores.qdrant.index import QdrantChunkIndex, connect  # noqa: PLC0415
    from reconciler.stores.sql import SqlDocumentTable  # noqa: PLC0415

    config = root / "reconciler.toml"
    config.write_text(
        '[table]\nurl = "sqlite:///reconciler.db"\n[index]\npath = "qdrant"\n'
        'collection = "corpus"\n[guard]\nmax_changed_fraction = 1.0\n',
        encoding="utf-8",
    )
    table = SqlDocumentTable.from_url(f"sqlite:///{root / 'reconciler.db'}")
    table.ensure_schema(create=True)
    documents = iter(rows(n))
    while batch := list(islice(documents, 5000)):
        table.upsert_documents(batch, chunk_counts={d.doc_id: 0 for d in batch})
    table.close()
    index = QdrantChunkIndex(connect(path=str(root / "qdrant")), collection="corpus")
    index.ensure_collection(dim=16)
    index.close()
    proposals = Proposals(
        proposals=tuple(
            Proposal(
                id=f"link-{i:010x}",
                kind="link",
                score=0.86,
                evidence="titles 0.90 alike; `(old)` in the older title; dates 2020 -> 2021",
                decision="accept",
                older=f"b:old-{i}",
                newer=f"b:new-{i}",
                direction=DIRECTED,
            )
            for i in range(n)
        ),
        min_score=0.7,
        documents=2 * n,
    )
    reviewed = root / "reviewed.yaml"
    dumper = yaml.CSafeDumper if yaml.__with_libyaml__ else yaml.SafeDumper
    with reviewed.open("w", encoding="utf-8") as f:
        yaml.dump(proposals.as_dict(), f, Dumper=dumper, sort_keys=False, width=100)
    return config, reviewed


READ = """
import resource, sys, time
from pathlib import Path
from reconciler.app.declaring import from_file
t = time.perf_counter()
decisions, _ = from_file(Path(sys.argv[1]))
took = time.perf_counter() - t
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(f"{len(decisions)} {took:.2f} {rss:.0f}")
"""


FLOOR = """
import sqlite3, sys, time
n = int(sys.argv[2])
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA journal_mode=WAL")
conn.execute("PRAGMA synchronous=NORMAL")
at = "2026-12-04 20:00:00.000000"
text = '{"doc_family_id":"b:old-0000000","version_state":"superseded","superseded_by":null}'
t = time.perf_counter()
conn.execute("BEGIN IMMEDIATE")
conn.executemany(
    "UPDATE documents SET doc_family_id=?, updated_at=? WHERE doc_id=?",
    ((f"b:old-{i}", at, f"b:new-{i}") for i in range(n)),
)
conn.executemany(
    "UPDATE documents SET version_state=?, superseded_by=?, effective_to=?, updated_at=? "
    "WHERE doc_id=?",
    (("superseded", f"b:new-{i}", at, at, f"b:old-{i}") for i in range(n)),
)
conn.executemany(
    "INSERT INTO declarations (id, kind, doc_id, target, declared_by, declared_at, reason, "
    "evidence, score, proposal, run_id) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
    ((f"d-{i:012x}", "supersede", f"b:old-{i}", f"b:new-{i}", "bench", at,
      f"accepted proposal link-{i:010x}", "titles 0.90 alike; `(old)` in the older title",
      0.86, f"link-{i:010x}", "r" * 36) for i in range(n)),
)
conn.executemany(
    "INSERT INTO audit_log (run_id, at, actor, reason, target_type, target, before, after, "
    "prev_hash, entry_hash) VALUES (?,?,?,?,?,?,?,?,?,?)",
    (("r" * 36, at, "declare", "family/successor_not_marked", "row", f"b:old-{i}", text,
      text, f"{i:064x}", f"{i + 1:064x}") for i in range(3 * n)),
)
conn.executemany(
    'INSERT INTO findings (run_id, "check", kind, severity, family, doc_id, expected, '
    "actual, action, outstanding) VALUES (?,?,?,?,?,?,?,?,?,?)",
    (("r" * 36, "family", "successor_not_marked", "critical", f"b:old-{i}", f"b:old-{i}",
      text, text, "mark superseded by b:new-0 (table + payloads)", 1) for i in range(3 * n)),
)
conn.execute("COMMIT")
print(f"{time.perf_counter() - t:.2f}")
"""


def floor(root: Path, n: int) -> str:
    """The writes of the run as bare ``sqlite3`` executemany calls, on a copy of the corpus."""
    copy = root / "floor.db"
    shutil.copy(root / "reconciler.db", copy)
    out = subprocess.run(
        [sys.executable, "-c", FLOOR, str(copy), str(n)], capture_output=True, text=True,
        check=True,
    ).stdout.strip()  # fmt: skip
    copy.unlink()
    return out


def run(n: int, tmp: Path) -> None:
    root = Path(tempfile.mkdtemp(prefix=f"declare-{n}-", dir=tmp))
    try:
        _run(n, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # (a corpus of 100,000 is ~200 MB)


def _run(n: int, root: Path) -> None:
    t = time.perf_counter()
    config, reviewed = build(root, n)
    built = time.perf_counter() - t
    size = reviewed.stat().st_size
    out = subprocess.run(
        [sys.executable, "-c", READ, str(reviewed)], capture_output=True, text=True, check=True
    ).stdout.split()
    floored = floor(root, n)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "reconciler.cli", "--config", str(config), "--format", "json",
         "declare", str(reviewed), "--force", "--who", "bench"],
        capture_output=True, text=True, cwd=root, check=False,
    )  # fmt: skip
    declared = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime + after.ru_stime - used.ru_utime - used.ru_stime
    child = after.ru_maxrss / 1024
    print(
        f"N={n:,} proposals ({size / 1e6:.1f} MB file; corpus of {2 * n:,} rows built in "
        f"{built:.0f} s)\n  read and checked: {out[1]} s, peak RSS {out[2]} MB\n"
        f"  reconciler declare FILE --force: {declared:.1f} s, CPU {cpu:.1f} s (user + system; "
        f"exit {done.returncode}), peak "
        f"RSS of the children so far {child:.0f} MB\n"
        f"  floor (the same table writes, bare sqlite3 executemany): {floored} s"
    )
    if done.returncode != 0:
        print(done.stdout[-2000:], done.stderr[-2000:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000")
    parser.add_argument("--tmpdir", type=Path, default=Path(tempfile.gettempdir()))
    args = parser.parse_args()
    for n in (int(s) for s in args.sizes.split(",")):
        run(n, args.tmpdir)


if __name__ == "__main__":
    main()
