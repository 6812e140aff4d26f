"""``python -m bench.audit``: how long ``reconciler audit served`` and ``audit history`` take,
and how much memory, as the audit log grows; ``audit verify`` beside them (the walk both
start with).

For each size it builds a SQLite document table whose audit log holds that many entries,
shaped as the writers write them: an ingestion of documents (families of three versions, ten
chunks each; an intent a document with its points and payload, a confirmation every 64),
then reconciliation runs that supersede the older versions family after family (an intent a
document with its points, the payload found and the payload written, a confirmation every
25 intents, as batches of 256 points), until the log has the entries asked for. Entries go
in through the audit repository's own ``append`` (hashed, chained), in transactions of
10,000. Then each command runs as a person runs it, a fresh process of the console script,
for one family in the middle of the log; its wall time, its CPU time (user + system: a loaded
machine stretches wall time, not CPU time) and peak resident memory (the process's
``ru_maxrss``) are printed. The answer's memory follows the family asked about:
it should not grow with the log.

    .venv/bin/python -m bench.audit                            # 100,000 and 1,000,000 entries
    .venv/bin/python -m bench.audit --entries 20000 --json audit.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from reconciler.model import AuditEntry
from reconciler.stores.sql import SqlDocumentTable, audit

CHUNKS = 10
VERSIONS = 3
#: Entries appended a transaction.
BATCH = 10_000
START = datetime(2025, 1, 1, tzinfo=UTC)
TIMEOUT = 3600


def reconciler_command() -> list[str]:
    script = Path(sys.executable).with_name("reconciler")
    return [str(script)] if script.exists() else [sys.executable, "-m", "reconciler.cli"]


def payload(family: int, version: int, state: str, end: str) -> dict[str, Any]:
    return {
        "doc_family_id": f"bench:f{family:06d}",
        "doc_version": version,
        "version_state": state,
        "superseded_by": None if state == "current" else f"bench:f{family:06d}-v{version + 1}",
        "effective_from": f"{2020 + version}-01-01T00:00:00Z",
        "effective_to": end,
        "doc_class": "policy",
        "quarantined": False,
        "quarantine_reason": None,
    }


def points(family: int, version: int) -> list[str]:
    return [str(uuid.uuid5(uuid.NAMESPACE_URL, f"{family}/{version}/{n}")) for n in range(CHUNKS)]


def entries(total: int) -> Iterator[AuditEntry]:
    """``total`` entries: an ingestion of ``total / 3`` documents, then runs superseding."""
    families = max(1, total // (2 * VERSIONS))
    at = START
    tick = timedelta(milliseconds=7)
    ingest = str(uuid.uuid4())
    made = 0
    for family in range(families):
        for version in range(1, VERSIONS + 1):
            at += tick
            yield AuditEntry(
                ingest,
                at,
                "ingest",
                "ingest",
                "ingest",
                f"bench:f{family:06d}-v{version}",
                None,
                {
                    "source": "bench",
                    "source_key": f"f{family:06d}-v{version}.md",
                    "source_hash": "sha256:" + "0" * 64,
                    "chunks": CHUNKS,
                    "payload": payload(family, version, "current", "9999-12-31T00:00:00Z"),
                    "points": points(family, version),
                },
            )
            made += 1
            if made % 64 == 0:
                yield AuditEntry(ingest, at, "ingest", "confirm", "confirm", ingest, None, {})
                made += 1
    while made < total:
        run = str(uuid.uuid4())
        at += timedelta(hours=1)
        for family in range(families):
            for version in range(1, VERSIONS):
                end = f"{2021 + version}-01-01T00:00:00Z"
                at += tick
                yield AuditEntry(
                    run,
                    at,
                    "cli",
                    "family/successor_not_marked",
                    "payload",
                    f"bench:f{family:06d}-v{version}",
                    {
                        "points": points(family, version),
                        "payload": payload(family, version, "current", "9999-12-31T00:00:00Z"),
                    },
                    {"payload": payload(family, version, "superseded", end)},
                )
                made += 1
                if made % 25 == 0:
                    yield AuditEntry(run, at, "cli", "confirm", "confirm", run, None, {})
                    made += 1
                if made >= total:
                    break
            if made >= total:
                break
        yield AuditEntry(run, at, "cli", "confirm", "confirm", run, None, {})


def build(folder: Path, total: int) -> tuple[Path, int, datetime]:
    """The table with its log; returns the config, the entries written and the last instant."""
    url = f"sqlite:///{folder / 'reconciler.db'}"
    table = SqlDocumentTable.from_url(url)
    table.ensure_schema(create=True)
    written, last = 0, START
    batch: list[AuditEntry] = []
    with Session(table.engine) as session:
        for entry in entries(total):
            batch.append(entry)
            if len(batch) >= BATCH:
                with session.begin():
                    audit.append(session, batch)
                written += len(batch)
                last, batch = batch[-1].at, []
        if batch:
            with session.begin():
                audit.append(session, batch)
            written += len(batch)
            last = batch[-1].at
    table.close()
    config = folder / "reconciler.toml"
    config.write_text(
        f'[table]\nurl = "{url}"\n[index]\npath = "qdrant"\ncollection = "corpus"\n'
        '[[sources]]\nname = "bench"\ntype = "vault"\npath = "vault"\n',
        encoding="utf-8",
    )
    (folder / "vault").mkdir()
    return config, written, last


def run_measured(argv: list[str], cwd: Path) -> tuple[float, float, str, float]:
    """Wall seconds, peak resident MiB (``ru_maxrss``, by ``wait4``), stdout and CPU seconds
    (user + system, by ``wait4``: what other processes on shared cores do not stretch) of one
    fresh process."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(argv, cwd=cwd, stdout=out, stderr=err)
        _pid, status, usage = os.wait4(process.pid, 0)
        elapsed = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if process.returncode != 0:
            raise SystemExit(
                f"{' '.join(argv)} exited {process.returncode}:\n{err.read().decode()[-2000:]}"
            )
        cpu = usage.ru_utime + usage.ru_stime
        return elapsed, usage.ru_maxrss / 1024, out.read().decode(), cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.audit", description=__doc__)
    parser.add_argument(
        "--entries",
        default="100000,1000000",
        help="comma-separated log sizes (default 100000,1000000)",
    )
    parser.add_argument("--tmpdir", type=Path, help="where to build the logs")
    parser.add_argument("--json", type=Path, help="also write the raw results to this file")
    args = parser.parse_args(argv)
    command = reconciler_command()
    results = []
    print(f"reconciler audit over growing logs ({' '.join(command)})")
    print(f"load average at start: {Path('/proc/loadavg').read_text().split()[0]}")
    header = (
        f"{'entries':>9} {'build (s)':>10} {'build CPU':>10} {'db (MiB)':>9} "
        f"{'verify (s)':>11} {'verify CPU':>11} {'verify MiB':>11} "
        f"{'served (s)':>11} {'served CPU':>11} {'served MiB':>11} "
        f"{'history (s)':>12} {'history CPU':>12} {'history MiB':>12} {'replayed':>9}"
    )
    print(header)
    print("-" * len(header))
    for total in (int(n) for n in args.entries.split(",")):
        folder = Path(tempfile.mkdtemp(prefix="bench-audit-", dir=args.tmpdir))
        try:
            started, cpu_started = time.perf_counter(), time.process_time()
            config, written, last = build(folder, total)
            build_s = time.perf_counter() - started
            build_cpu = time.process_time() - cpu_started
            size = (folder / "reconciler.db").stat().st_size / 2**20
            base = [*command, "--config", str(config)]
            family = f"bench:f{max(1, total // (2 * VERSIONS)) // 2:06d}"
            at = (last - timedelta(minutes=1)).isoformat()
            verify = run_measured([*base, "audit", "verify"], folder)
            served = run_measured(
                [*base, "--format", "json", "audit", "served", "--at", at, "--family", family],
                folder,
            )
            history = run_measured(
                [*base, "--format", "json", "audit", "history", "--family", family], folder
            )
            replayed = json.loads(served[2])["log"]["replayed"]
            row = {
                "entries": written,
                "build_s": build_s,
                "build_cpu_s": build_cpu,
                "db_mib": size,
                "verify_s": verify[0],
                "verify_mib": verify[1],
                "verify_cpu_s": verify[3],
                "served_s": served[0],
                "served_mib": served[1],
                "served_cpu_s": served[3],
                "history_s": history[0],
                "history_mib": history[1],
                "history_cpu_s": history[3],
                "replayed": replayed,
            }
            results.append(row)
            print(
                f"{written:>9} {build_s:>10.1f} {build_cpu:>10.1f} {size:>9.1f} "
                f"{verify[0]:>11.2f} {verify[3]:>11.2f} {verify[1]:>11.1f} "
                f"{served[0]:>11.2f} {served[3]:>11.2f} {served[1]:>11.1f} "
                f"{history[0]:>12.2f} {history[3]:>12.2f} {history[1]:>12.1f} {replayed:>9}",
                flush=True,
            )
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=2), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
