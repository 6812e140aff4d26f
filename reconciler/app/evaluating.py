"""``reconciler eval``: a sliced retrieval scorecard over a golden-query file, for CI to gate on.

Each golden case is a query, the document that must be found in the top k, and the documents
that must never be cited there (the versions it replaced). Retrieval goes the way production
retrieval goes: the ingest embedder and ``default_filter()``, so the scorecard measures what
the reconciler keeps true, and nothing else of the reconciler is read. Per slice it reports
Latest@k (share of cases whose expected document is in the top k) and stale-cited (cases that
cite a forbidden document), a hard zero. A slice with no cases is "uncovered", never 1.0. A
committed baseline of per-slice Latest@k turns any drop into a regression. The golden format is
described in docs/eval.md.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from reconciler.app.wiring import open_qdrant_index
from reconciler.embedding import make_embedder
from reconciler.errors import ReconcilerError
from reconciler.filters import default_filter
from reconciler.integrations.retrieving import vector_name_of
from reconciler.settings import Settings

if TYPE_CHECKING:
    from reconciler.stores.qdrant.index import QdrantChunkIndex

log = logging.getLogger(__name__)

__all__ = [
    "Baseline",
    "Case",
    "Golden",
    "GoldenError",
    "evaluate",
    "load_baseline",
    "load_golden",
    "write_baseline",
]

#: The slice a case belongs to when it names none.
DEFAULT_SLICE = "default"
CASE_KEYS = frozenset({"id", "query", "expect", "must_not_cite", "slice"})
TOP_KEYS = frozenset({"slices", "cases"})
#: How far the candidate list may grow (as a multiple of k) to find k distinct documents.
MAX_WIDEN = 64


class GoldenError(ReconcilerError):
    """A golden or baseline file is unreadable or malformed; ``problems`` lists every one."""

    def __init__(self, path: Path | str, problems: list[str]) -> None:
        self.path = str(path)
        self.problems = problems
        lines = [f"{len(problems)} problem(s) in {path}:"] + [f"  {p}" for p in problems]
        super().__init__("\n".join(lines))


@dataclass(frozen=True)
class Case:
    """One golden query: what must be found, what must not be cited, and its slice."""

    id: str
    query: str
    expect: str
    must_not_cite: tuple[str, ...]
    slice: str


@dataclass(frozen=True)
class Golden:
    """A validated golden file: its cases and every slice (declared first, then used)."""

    cases: tuple[Case, ...]
    slices: tuple[str, ...]


def _read_structured(path: Path) -> Any:
    """Parse JSON (``.json``) or YAML (anything else; JSON is YAML too)."""
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise GoldenError(path, [f"cannot read the file: {exc.strerror or exc}"]) from exc
    try:
        if path.suffix.lower() == ".json":
            return json.loads(raw)
        return yaml.safe_load(raw)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise GoldenError(path, [f"not valid {path.suffix.lstrip('.') or 'YAML'}: {exc}"]) from exc


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())


def load_golden(path: Path | str) -> Golden:
    """Read and validate a golden file; every malformed case is reported at once."""
    path = Path(path)
    data = _read_structured(path)
    problems: list[str] = []
    declared: list[str] = []
    if isinstance(data, Mapping):
        for key in sorted(set(map(str, data)) - TOP_KEYS):
            problems.append(f"{key}: unknown top-level key (expected: cases, slices)")
        raw_slices = data.get("slices", [])
        if not isinstance(raw_slices, list) or not all(_text(s) for s in raw_slices):
            problems.append("slices: must be a list of slice names")
        else:
            for name in raw_slices:
                if name in declared:
                    problems.append(f"slices: {name!r} is declared twice")
                else:
                    declared.append(name)
        raw_cases = data.get("cases")
        if raw_cases is None:
            raw_cases = []
            if not declared:
                problems.append("cases: missing (a list of golden cases)")
    else:
        raw_cases = data
    if not isinstance(raw_cases, list):
        problems.append("cases: must be a list of golden cases")
        raw_cases = []

    cases: list[Case] = []
    used: list[str] = []
    seen_ids: set[str] = set()
    for number, raw in enumerate(raw_cases, start=1):
        where = f"case {number}"
        if not isinstance(raw, Mapping):
            problems.append(f"{where}: must be a mapping with query, expect, must_not_cite, slice")
            continue
        if _text(raw.get("id")):
            where = f"case {number} ({raw['id']})"
        before = len(problems)
        for key in sorted(set(map(str, raw)) - CASE_KEYS):
            problems.append(f"{where}: unknown key {key!r}")
        if not _text(raw.get("query")):
            problems.append(f"{where}: query: a non-empty string is required")
        if not _text(raw.get("expect")):
            problems.append(f"{where}: expect: the doc id that must be found is required")
        forbidden = raw.get("must_not_cite", [])
        if forbidden is None:
            forbidden = []
        if not isinstance(forbidden, list) or not all(_text(d) for d in forbidden):
            problems.append(f"{where}: must_not_cite: must be a list of doc ids")
            forbidden = []
        elif raw.get("expect") in forbidden:
            problems.append(f"{where}: must_not_cite: contains the expected doc {raw['expect']!r}")
        name = raw.get("slice", DEFAULT_SLICE)
        if not _text(name):
            problems.append(f"{where}: slice: must be a non-empty name")
        elif declared and name not in declared:
            problems.append(
                f"{where}: slice: {name!r} is not declared in slices ({', '.join(declared)})"
            )
        case_id = str(raw["id"]) if raw.get("id") is not None else f"case-{number}"
        if case_id in seen_ids:
            problems.append(f"{where}: id: {case_id!r} is used twice")
        seen_ids.add(case_id)
        if len(problems) > before:
            continue
        cases.append(
            Case(
                id=case_id,
                query=raw["query"],
                expect=raw["expect"],
                must_not_cite=tuple(forbidden),
                slice=name,
            )
        )
        if name not in declared and name not in used:
            used.append(name)
    if problems:
        raise GoldenError(path, problems)
    return Golden(cases=tuple(cases), slices=(*declared, *used))


@dataclass(frozen=True)
class Baseline:
    """Committed per-slice Latest@k (None: the slice was uncovered) and the k it was measured at."""

    slices: Mapping[str, float | None]
    k: int | None = None


def load_baseline(path: Path | str) -> Baseline:
    """Read a baseline written by ``write_baseline``."""
    path = Path(path)
    data = _read_structured(path)
    slices = data.get("slices") if isinstance(data, Mapping) else None
    if not isinstance(slices, Mapping):
        raise GoldenError(path, ['a baseline is {"k": K, "slices": {name: Latest@k}}'])
    problems = [
        f"slices.{name}: Latest@k must be a number from 0 to 1, or null"
        for name, value in slices.items()
        if value is not None
        and (isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1)
    ]
    k = data.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        problems.append("k: must be a positive integer")
    if problems:
        raise GoldenError(path, problems)
    return Baseline(
        slices={str(name): None if v is None else float(v) for name, v in slices.items()}, k=k
    )


def write_baseline(path: Path | str, result: Mapping[str, Any]) -> dict[str, Any]:
    """Write the per-slice Latest@k of an ``evaluate`` result as a baseline file to commit."""
    data = {
        "k": result["k"],
        "golden": result["golden"],
        "slices": {s["slice"]: s["latest_at_k"] for s in result["slices"]},
    }
    Path(path).write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


def _top_documents(
    index: QdrantChunkIndex, settings: Settings, vector: Sequence[float], k: int
) -> list[str]:
    """The first k distinct documents, best chunk per document, in rank order."""
    keys = settings.index.key_map
    # the collection's dense vector: its only named one (a collection a framework wrote and
    # ``bootstrap`` adopted, LlamaIndex's hybrid "text-dense"), or the unnamed one
    using = vector_name_of(index.client, settings.index.collection, None)
    limit = k * 4
    while True:
        hits = index.client.query_points(
            settings.index.collection,
            query=list(vector),
            query_filter=default_filter(keys=keys),
            using=using,
            limit=limit,
            with_payload=True,
        ).points
        docs: list[str] = []
        for hit in hits:
            doc_id = keys.from_point(hit.payload).get("doc_id")
            if isinstance(doc_id, str) and doc_id not in docs:
                docs.append(doc_id)
        if len(docs) >= k or len(hits) < limit or limit >= k * MAX_WIDEN:
            return docs[:k]
        limit *= 2


def evaluate(
    settings: Settings,
    golden_path: Path | str,
    *,
    k: int = 5,
    baseline: Path | str | Baseline | None = None,
    write_to: Path | str | None = None,
) -> dict[str, Any]:
    """Run every golden case through the ingest embedder and ``default_filter()``; score slices.

    ``ok`` is False when a slice cites a forbidden document (stale-cited is a hard zero) or a
    slice's Latest@k is below its ``baseline`` value (tolerance 0). ``write_to``: write this
    run's per-slice Latest@k there as the baseline to commit (``write_baseline``).
    """
    if k < 1:
        raise ReconcilerError(f"k must be at least 1 (got {k})")
    golden = load_golden(golden_path)
    reference = load_baseline(baseline) if isinstance(baseline, str | Path) else baseline
    if reference is not None and reference.k is not None and reference.k != k:
        raise GoldenError(
            str(baseline) if isinstance(baseline, str | Path) else "the baseline",
            [f"k: the baseline was measured at k={reference.k}, this run uses k={k}"],
        )

    results: list[dict[str, Any]] = []
    if golden.cases:
        embedder = make_embedder(
            settings.ingest.embedder, dim=settings.ingest.dim, model=settings.ingest.model
        )
        index = open_qdrant_index(settings, needed_by="reconciler eval")
        try:
            if not index.exists():
                raise ReconcilerError(
                    f"collection {settings.index.collection!r} does not exist: nothing to "
                    "evaluate (run `reconciler ingest` first)"
                )
            vectors = embedder.embed([case.query for case in golden.cases])
            for case, vector in zip(golden.cases, vectors, strict=True):
                top = _top_documents(index, settings, vector, k)
                cited = [doc for doc in top if doc in case.must_not_cite]
                found = case.expect in top
                results.append(
                    {
                        "id": case.id,
                        "slice": case.slice,
                        "query": case.query,
                        "expect": case.expect,
                        "found": found,
                        "rank": top.index(case.expect) + 1 if found else None,
                        "stale_cited": cited,
                        "top": top,
                        "pass": found and not cited,
                    }
                )
        finally:
            index.close()

    slices: list[dict[str, Any]] = []
    for name in golden.slices:
        mine = [r for r in results if r["slice"] == name]
        count = len(mine)
        latest = sum(r["found"] for r in mine) / count if count else None
        stale = sum(bool(r["stale_cited"]) for r in mine)
        base = reference.slices.get(name) if reference is not None else None
        regression = None
        if base is not None:
            if latest is None:
                regression = "uncovered (the baseline has a value)"
            elif latest < base:
                regression = f"Latest@{k} {latest:.3f} < baseline {base:.3f}"
        status = "uncovered" if not count else "ok"
        if stale:
            status = "FAIL: stale cited"
        if regression:
            status = "REGRESSION" if not stale else status + ", REGRESSION"
        slices.append(
            {
                "slice": name,
                "cases": count,
                "pass": sum(r["pass"] for r in mine),
                "fail": count - sum(r["pass"] for r in mine),
                "latest_at_k": latest,
                "stale_cited": stale,
                "baseline": base,
                "regression": regression,
                "status": status,
            }
        )
    hard_zero = [s["slice"] for s in slices if s["stale_cited"]]
    regressions = [s["slice"] for s in slices if s["regression"]]
    ok = not hard_zero and not regressions
    log.info(
        "eval %s: %d case(s), %d slice(s), stale-cited slices %d, regressions %d",
        golden_path,
        len(results),
        len(slices),
        len(hard_zero),
        len(regressions),
    )
    data = {
        "golden": str(golden_path),
        "collection": settings.index.collection,
        "k": k,
        "ok": ok,
        "hard_zero_failed": hard_zero,
        "regressions": regressions,
        "slices": slices,
        "cases": results,
    }
    if write_to is not None:
        write_baseline(write_to, data)
    return data
