"""One benchmark phase in a fresh process: ``python -m bench.phases PHASE ROOT N [options]``.

Prints one JSON object on its last stdout line: the phase's measurements plus its memory —
RSS after imports (the baseline), RSS after opening the stores (qdrant-client local mode
loads the whole collection here), the process peak, and the peak of the phase proper (the
high-water mark reset after opening, where the kernel allows it).
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import resource
import subprocess
import sys
import time
import tracemalloc
import warnings
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import Any

from qdrant_client import models

from bench import memory
from bench.corpus import (
    COLLECTION,
    VERSIONS,
    Layout,
    chunk_ids,
    chunks,
    documents,
    drift_targets,
    family_of,
)
from bench.floors import WriteRecorder, recorded_ids, set_payload_floor, upsert_floor
from reconciler.checks.index import REQUIRED_INDEXES
from reconciler.ingesting import point_id_for
from reconciler.model import PayloadWrite, RunMode
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, Options, Report
from reconciler.ports import ChunkIndex
from reconciler.stores.qdrant.index import QdrantChunkIndex, connect
from reconciler.stores.sql import SqlDocumentTable
from reconciler.writing.applying import Applier

#: The checks that need no system of record (family and hash read the sources).
CHECKS = frozenset({"payload", "siblings", "dates", "ttl", "index"})
#: Every run evaluates as of this instant: after every version's effective_from.
NOW = datetime(2030, 1, 1, tzinfo=UTC)
#: Same page size as the engine's default scroll_batch.
SCROLL_BATCH = 1000
#: Families written per build batch (rows + points), so the build streams too.
BUILD_FAMILIES = 100

PHASES = (
    "build",
    "drift",
    "scroll",
    "check",
    "apply",
    "verify",
    "repair",
    "repair-all",
    "repair-cli",
    "optimize",
    "embed",
    "langchain",
)
#: Index engines the bench can run on (``[index] engine`` in the settings).
ENGINES = ("local", "edge")
#: Documents repaired one ``repair --doc`` run each in the ``repair`` phase (local mode
#: selects a document's points by filtering every point in Python, so a sample is timed).
REPAIR_SAMPLE = 20

warnings.filterwarnings("ignore", message=".*[Ll]ocal mode is not recommended.*")


def edge_missing() -> str | None:
    """Why ``--engine edge`` cannot run here (``None`` when it can)."""
    try:
        import reconciler.stores.edge.index  # noqa: F401, PLC0415 - the edge extra
    except ImportError as exc:
        return (
            "--engine edge needs the Qdrant Edge adapter (reconciler/stores/edge/index.py, "
            f"[index] engine = \"edge\") and qdrant-edge-py: pip install -e '.[edge]' ({exc})"
        )
    return None


class Stores:
    """The table and the index of one corpus, opened (and closed) together."""

    def __init__(self, layout: Layout, *, create: bool = False, engine: str = "local") -> None:
        self.index: ChunkIndex
        self.engine_name = engine
        if engine == "edge":
            missing = edge_missing()
            if missing is not None:
                raise SystemExit(missing)
            # As [index] engine = "edge" opens it: the shard index.path/index.collection.
            from reconciler.stores.edge.index import EdgeChunkIndex  # noqa: PLC0415 - the edge extra

            self.index = EdgeChunkIndex(layout.root / "edge" / COLLECTION)
        else:
            self.index = QdrantChunkIndex(connect(path=layout.qdrant_path), collection=COLLECTION)
        self.table = SqlDocumentTable.from_url(layout.table_url)
        self.table.ensure_schema(create=create)

    def reopen_index(self) -> None:
        """Open the Edge shard again when a floor has closed it (local mode stays open)."""
        if self.engine_name == "edge":
            from reconciler.stores.edge.index import EdgeChunkIndex  # noqa: PLC0415

            if not self.index.exists():
                self.index = EdgeChunkIndex(self.index.path)

    def engine(self) -> Reconciler:
        """An engine with no system of record configured."""
        return Reconciler(table=self.table, index=self.index, sources=[])

    def close(self) -> None:
        """Release the local-mode lock and the connection pool."""
        self.index.close()
        self.table.close()


class Clock:
    """Best wall-clock and process-CPU seconds over the runs it timed.

    CPU time is what the ratios use: other processes on the same cores stretch wall time
    but not this process's CPU time.
    """

    def __init__(self) -> None:
        self.wall = float("inf")
        self.cpu = float("inf")
        self.runs = 0

    def time(self, action: Callable[[], Any]) -> Any:
        """Run ``action`` once, keep the best times, return its result."""
        wall, cpu = time.perf_counter(), time.process_time()
        result = action()
        self.wall = min(self.wall, time.perf_counter() - wall)
        self.cpu = min(self.cpu, time.process_time() - cpu)
        self.runs += 1
        return result

    def as_dict(self, prefix: str = "") -> dict[str, Any]:
        """``{seconds, cpu_seconds, runs}``, keys optionally prefixed."""
        return {
            f"{prefix}seconds": self.wall,
            f"{prefix}cpu_seconds": self.cpu,
            f"{prefix}runs": self.runs,
        }


def _cpu(clock: Clock, action: Callable[[], Any]) -> tuple[float, Any]:
    """Time ``action`` on ``clock``; return the CPU seconds of this one run, and its result."""
    started = time.process_time()
    result = clock.time(action)
    return time.process_time() - started, result


def paired_ratios(checks: list[float], scrolls: list[float]) -> list[float]:
    """Each check's time over the mean of the two bare scrolls around it (``scrolls`` has one
    more entry than ``checks``: scroll, check, scroll, check, ..., scroll); a check whose
    scrolls took no measurable time has no ratio."""
    if len(scrolls) != len(checks) + 1:
        raise ValueError("one more scroll than checks: each check has one before and after")
    return [
        check / ((before + after) / 2)
        for check, before, after in zip(checks, scrolls, scrolls[1:], strict=False)
        if before + after > 0
    ]


def _profile(action: Callable[[], Any], top: int = 25) -> str:
    profiler = cProfile.Profile()
    profiler.runcall(action)
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def _heap_peak(action: Callable[[], Any]) -> float:
    """Peak MiB of Python objects allocated by one more (untimed) run and live at once."""
    tracemalloc.start()
    try:
        action()
        return tracemalloc.get_traced_memory()[1] / (1024.0 * 1024.0)
    finally:
        tracemalloc.stop()


def _bare_scroll(index: Any, *, read: bool = False) -> int:
    """Payload-only scroll of the whole collection, as the engine's scan asks for it
    (``read``: and take each point's payload, which Qdrant Edge builds only when asked)."""
    if not isinstance(index, QdrantChunkIndex):
        return _bare_edge_scroll(index, read=read)
    client = index.client
    selector = models.PayloadSelectorInclude(include=index.keys.scan_paths())
    offset: models.ExtendedPointId | None = None
    seen = 0
    while True:
        points, offset = client.scroll(
            COLLECTION,
            limit=SCROLL_BATCH,
            offset=offset,
            with_payload=selector,
            with_vectors=False,
        )
        seen += len(points)
        if read:
            for point in points:
                _ = point.payload
        if offset is None:
            return seen


def _bare_edge_scroll(index: Any, *, read: bool = False) -> int:
    """The same on a Qdrant Edge shard (its own scroll request, no adapter in between)."""
    import qdrant_edge as qe  # noqa: PLC0415 - the edge extra

    selector = qe.PayloadSelector.Include(index.keys.scan_paths())
    offset: Any = None
    seen = 0
    while True:
        request = qe.ScrollRequest(
            offset=offset, limit=SCROLL_BATCH, filter=None, with_payload=selector, with_vector=False
        )
        points, offset = index.shard.scroll(request)
        seen += len(points)
        if read:
            for point in points:
                _ = point.payload
        if offset is None:
            return seen


def _run(stores: Stores, mode: str, guard: Guard | None = None) -> Report:
    options = Options(mode=mode, checks=CHECKS, now=NOW, actor="cli", guard=guard or Guard())
    return stores.engine().run(options)


def _repair(stores: Stores, doc: str) -> Report:
    """``reconciler repair --doc DOC``: a scoped run (its points through the doc_id filter)."""
    options = Options(mode=RunMode.REPAIR, checks=CHECKS, now=NOW, actor="cli", doc_id=doc)
    return stores.engine().run(options)


def _kinds(report: Report) -> dict[str, int]:
    return dict(Counter(f"{f.check}/{f.kind}" for f in report.findings))


def build(layout: Layout, *, engine: str = "local") -> dict[str, Any]:
    """Write the rows and points; return counts."""
    layout.root.mkdir(parents=True, exist_ok=True)
    stores = Stores(layout, create=True, engine=engine)
    try:
        stores.index.ensure_collection(dim=layout.dim)
        if stores.index.supports_payload_indexes:
            # As a deployment the reconciler has applied once holds them (Edge, a server): the
            # filter's indexes exist, so no phase pays for building them over the corpus.
            for key, schema in REQUIRED_INDEXES.items():
                stores.index.create_payload_index(key=key, schema=schema)
        rng = random.Random(layout.seed)
        rows_iter = documents(layout)
        clock = Clock()

        def write() -> tuple[int, int]:
            rows_written = points = 0
            while batch := list(islice(rows_iter, BUILD_FAMILIES * VERSIONS)):
                counts = {row.doc_id: len(chunk_ids(row.doc_id)) for row in batch}
                rows_written += stores.table.upsert_documents(batch, chunk_counts=counts)
                points += stores.index.upsert_chunks(chunks(layout, batch, rng))
            return rows_written, points

        rows_written, points = clock.time(write)
        return {"rows": rows_written, "points": points, **clock.as_dict()}
    finally:
        stores.close()


def optimize(layout: Layout, *, on_disk_indexes: bool = False) -> dict[str, Any]:
    """Run Qdrant Edge's optimizers on the shard, as a deployment that searches a large shard
    does (its appendable segment becomes an indexed, immutable one, HNSW graph included), and
    with ``on_disk_indexes`` re-create its payload indexes memory-mapped (``on_disk``) rather
    than loaded into memory. Edge only: local mode has neither."""
    import qdrant_edge as qe  # noqa: PLC0415 - the edge extra

    stores = Stores(layout, engine="edge")
    try:
        shard = stores.index.shard
        clock = Clock()
        optimized = bool(clock.time(shard.optimize))
        recreated = 0
        if on_disk_indexes:
            params = {
                qe.PayloadSchemaType.Keyword: qe.KeywordIndexParams,
                qe.PayloadSchemaType.Datetime: qe.DatetimeIndexParams,
                qe.PayloadSchemaType.Bool: qe.BoolIndexParams,
                qe.PayloadSchemaType.Integer: qe.IntegerIndexParams,
            }
            for path, info in shard.info().payload_schema.items():
                kind = params.get(info.data_type)
                if kind is not None:
                    shard.update(qe.UpdateOperation.create_field_index(path, kind(on_disk=True)))
                    recreated += 1
        shard.flush()
        return {"optimized": optimized, "on_disk_indexes": recreated, **clock.as_dict()}
    finally:
        stores.close()


def drift(layout: Layout, docs: int, *, engine: str = "local") -> dict[str, Any]:
    """Reset ``version_state`` to current on every chunk of ``docs`` superseded documents."""
    targets = drift_targets(layout, docs)
    ids: list[models.ExtendedPointId] = [
        point_id_for(chunk) for target in targets for chunk in chunk_ids(target)
    ]
    stores = Stores(layout, engine=engine)
    try:
        index = stores.index
        clock = Clock()

        def reset() -> None:
            if not isinstance(index, QdrantChunkIndex):  # Edge: through its adapter
                write = PayloadWrite(point_ids=tuple(ids), payload={"version_state": "current"})
                index.set_payloads([write], batch_size=1000)
                return
            client = index.client
            for start in range(0, len(ids), 1000):
                client.set_payload(
                    COLLECTION,
                    payload={"version_state": "current"},
                    points=ids[start : start + 1000],
                    wait=True,
                )

        clock.time(reset)
        return {"docs": len(targets), "points": len(ids), **clock.as_dict()}
    finally:
        stores.close()


class ApplyTimer:
    """Times ``Applier.apply`` (the repair proper: row, audit and payload writes) apart from
    the run around it (the check's scan, the checks, the run log)."""

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0

    def __enter__(self) -> ApplyTimer:
        self._original = Applier.apply
        timer = self

        def timed(applier: Applier, *args: Any, **kwargs: Any) -> Any:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                return timer._original(applier, *args, **kwargs)
            finally:
                timer.wall += time.perf_counter() - wall
                timer.cpu += time.process_time() - cpu

        Applier.apply = timed  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Applier.apply = self._original  # type: ignore[method-assign]


def _floors(stores: Stores, recorded: WriteRecorder, *, upsert: bool = False) -> dict[str, Any]:
    """The raw floors of a repair that just ran, in its process: its payload writes replayed
    with the engine's own calls (``floor_*``; Edge's on the shard loaded again, which closes
    the index: it is opened again after), and with ``upsert`` the same points upserted whole
    (``upsert_*``: re-ingesting them, the embedding aside)."""
    found = set_payload_floor(stores.index, recorded).as_dict("floor_")
    stores.reopen_index()
    if upsert:
        found.update(upsert_floor(stores.index, recorded_ids(recorded)).as_dict("upsert_"))
    return found


def measure(
    phase: str, layout: Layout, *, repeat: int, profile: bool, engine: str = "local", docs: int = 0
) -> dict[str, Any]:
    """Open the stores, reset the peak, run one measured phase."""
    stores = Stores(layout, engine=engine)
    result: dict[str, Any] = {}
    try:
        result["rss_opened"] = memory.rss()
        result["peak_open"] = memory.peak()
        result["peak_reset"] = memory.reset_peak()
        action: Callable[[], Any]
        clock = Clock()
        if phase == "scroll":
            action = lambda: _bare_scroll(stores.index)  # noqa: E731
            for _ in range(max(repeat, 1)):
                seen = clock.time(action)
            result.update(chunks=seen, **clock.as_dict())
        elif phase in ("check", "verify"):
            # Interleaved with a bare scroll in the same process, so that load from other
            # processes hits both sides of the ratio alike.
            action = lambda: _run(stores, "check")  # noqa: E731
            scroll, reading = Clock(), Clock()
            report: Report | None = None
            # CPU seconds of each run, for the paired ratios: each check against the bare
            # scrolls just before and just after it (a machine whose speed drifts over minutes
            # moves the best-of ratio more than the code does).
            scrolls: list[float] = []
            checks: list[float] = []
            # One untimed scroll first: the first one after opening costs Edge 1.3-1.5x the
            # next (1M: 10.6 s against 7.8 s), which with --repeat 1 made the reading scroll
            # the yardstick slower than it is and the check's ratio to it look better.
            _bare_scroll(stores.index, read=True)
            for _ in range(max(repeat, 1)):
                reading.time(lambda: _bare_scroll(stores.index, read=True))
                scrolls.append(_cpu(scroll, lambda: _bare_scroll(stores.index))[0])
                spent, report = _cpu(clock, action)
                checks.append(spent)
            # The scroll after the last check: for its paired ratio only (on no clock, so the
            # best-of ratios still compare as many scrolls as checks).
            scrolls.append(_cpu(Clock(), lambda: _bare_scroll(stores.index))[0])
            assert report is not None
            result["paired_cpu_ratios"] = paired_ratios(checks, scrolls)
            # The engine's own heap: the check's tracemalloc peak above the bare scroll's (the
            # store's pages), per document row.
            result["scroll_heap_peak"] = _heap_peak(lambda: _bare_scroll(stores.index))
            result["documents"] = layout.documents
            result.update(
                chunks=report.chunks_scanned,
                findings=len(report.findings),
                kinds=_kinds(report),
                planned=report.plan.counts(),
                check_seconds=dict(getattr(report, "timings", {})),
                **clock.as_dict(),
                **scroll.as_dict("scroll_"),
                **reading.as_dict("read_scroll_"),
            )
        elif phase == "apply":
            action = lambda: _run(stores, "apply", Guard(max_changed_fraction=1.0))  # noqa: E731
            with ApplyTimer() as repair, WriteRecorder(stores.index, stores.table) as recorded:
                report = clock.time(action)
            result.update(repair_seconds=repair.wall, repair_cpu_seconds=repair.cpu)
            result.update(_floors(stores, recorded, upsert=True))
            applied = report.applied.counts() if report.applied else {}
            result.update(
                chunks=report.chunks_scanned,
                findings=len(report.findings),
                kinds=_kinds(report),
                refused=report.refused,
                repaired_docs=len({t.doc_id for t in report.plan.payload_targets}),
                points_written=int(applied.get("points", 0)),
                rows_written=int(applied.get("table", 0)),
                payload_operations=int(applied.get("payload", 0)),
                **clock.as_dict(),
            )
        elif phase == "repair":
            sample = drift_targets(layout, docs)[:REPAIR_SAMPLE]
            written = 0

            def repair_each() -> None:
                nonlocal written
                for target in sample:
                    done = _repair(stores, target)
                    written += int(done.applied.points) if done.applied else 0

            with ApplyTimer() as proper, WriteRecorder(stores.index, stores.table) as recorded:
                clock.time(repair_each)
            result.update(_floors(stores, recorded))
            result.update(
                repaired_docs=len(sample),
                points_written=written,
                repair_seconds=proper.wall,
                repair_cpu_seconds=proper.cpu,
                chunks=written,
                **clock.as_dict(),
            )
        elif phase == "repair-all":
            # ``reconciler repair --family F1 --family F2 ...``: one scoped run over the
            # families of every drifted document; its points through the doc_id filter.
            targets = drift_targets(layout, docs)
            families = frozenset(family_of(target) for target in targets)
            options = Options(
                mode=RunMode.REPAIR, checks=CHECKS, now=NOW, actor="cli", families=families
            )
            with ApplyTimer() as proper, WriteRecorder(stores.index, stores.table) as recorded:
                report = clock.time(lambda: stores.engine().run(options))
            result.update(_floors(stores, recorded))
            applied = report.applied.counts() if report.applied else {}
            result.update(
                repaired_docs=len({t.doc_id for t in report.plan.payload_targets}),
                families=len(families),
                points_written=int(applied.get("points", 0)),
                repair_seconds=proper.wall,
                repair_cpu_seconds=proper.cpu,
                chunks=report.chunks_scanned,
                **clock.as_dict(),
            )
        else:
            raise ValueError(f"unknown phase {phase!r}")
        result["peak_phase"] = memory.peak()
        result["peak"] = max(result["peak_open"], result["peak_phase"])
        if phase not in ("apply", "repair", "repair-all"):
            result["heap_peak"] = _heap_peak(action)
        if profile and phase in ("scroll", "check"):
            result["profile"] = _profile(action)
        return result
    finally:
        stores.close()


def repair_cli(layout: Layout, docs: int, *, engine: str = "local") -> dict[str, Any]:
    """``reconciler repair --family F1 --family F2 ...`` over the families of the drifted
    documents, as an operator runs it: the console command in a fresh process, timed from
    spawn to exit (interpreter, imports, opening the stores, the run, closing them). Its
    config names the corpus's table and index; no source, so the family and hash checks have
    nothing to read."""
    families = sorted({family_of(target) for target in drift_targets(layout, docs)})
    # (TOML basic strings take JSON's escapes: a path with a quote or a backslash survives)
    if engine == "edge":
        index = f'engine = "edge"\npath = {json.dumps(str(layout.root / "edge"))}\n'
    else:
        index = f"path = {json.dumps(layout.qdrant_path)}\n"
    config = layout.root / "bench-cli.toml"
    config.write_text(
        f"[table]\nurl = {json.dumps(layout.table_url)}\n\n"
        f"[index]\n{index}collection = {json.dumps(COLLECTION)}\n"
    )
    command = [sys.executable, "-m", "reconciler.cli", "--config", str(config)]
    command += ["--format", "json", "repair"]
    for family in families:
        command += ["--family", family]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # (a timeout: a command left behind would keep the shard's lock)
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=3600)
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(
            f"reconciler repair exited {done.returncode}:\n{done.stderr.strip()[-2000:]}"
        )
    report = json.loads(done.stdout)
    return {
        "seconds": seconds,
        "cpu_seconds": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "runs": 1,
        "families": len(families),
        "points_written": int(report["writes"]["points"]),
        "chunks": int(report["summary"].get("payload", {}).get("checked", 0)),
        # The command's own peak RSS (ru_maxrss of the largest child, KiB on Linux); its
        # imports are not this process's, so no "over imports" figure.
        "peak": after.ru_maxrss / 1024,
        "command": True,
    }


def main(argv: list[str] | None = None) -> int:
    """Run one phase and print its JSON result."""
    parser = argparse.ArgumentParser(prog="python -m bench.phases")
    parser.add_argument("phase", choices=PHASES)
    parser.add_argument("root", type=Path)
    parser.add_argument("size", type=int)
    parser.add_argument("--dim", type=int, default=16)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--repair-docs", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--engine", choices=ENGINES, default="local")
    parser.add_argument("--sample", type=int, default=2000, help="embed: chunks timed")
    parser.add_argument("--lc-docs", type=int, default=300, help="langchain: documents")
    parser.add_argument("--lc-changed", type=int, default=100, help="langchain: changed docs")
    parser.add_argument(
        "--on-disk-indexes",
        action="store_true",
        help="optimize: re-create the payload indexes memory-mapped",
    )
    args = parser.parse_args(argv)
    layout = Layout(root=args.root, requested=args.size, dim=args.dim, seed=args.seed)
    baseline = memory.rss()
    started = time.perf_counter()
    if args.phase == "build":
        result = build(layout, engine=args.engine)
    elif args.phase == "drift":
        result = drift(layout, args.repair_docs, engine=args.engine)
    elif args.phase == "repair-cli":
        result = repair_cli(layout, args.repair_docs, engine=args.engine)
    elif args.phase == "optimize":
        if args.engine != "edge":
            parser.error("optimize: Qdrant Edge only (--engine edge)")
        result = optimize(layout, on_disk_indexes=args.on_disk_indexes)
    elif args.phase == "embed":
        from bench.models import embed  # noqa: PLC0415 - torch only when asked for

        result = embed(args.sample)
    elif args.phase == "langchain":
        from bench.models import langchain_index  # noqa: PLC0415

        result = langchain_index(layout.root / "langchain", args.lc_docs, args.lc_changed)
    else:
        result = measure(
            args.phase,
            layout,
            repeat=args.repeat,
            profile=args.profile,
            engine=args.engine,
            docs=args.repair_docs,
        )
    result.setdefault("peak", memory.peak())
    result.update(phase=args.phase, wall=time.perf_counter() - started, rss_imports=baseline)
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
