"""``python -m bench.peps CHECKOUT``: the PEPs preset over a whole clone of python/peps.

Reads the repository by configuration alone (``examples/peps/reconciler.toml``, the source's
type and path rewritten), through the console script as a person runs it: ``init``,
``ingest``, ``run``, and a second ``run``. Then compares what ``default_filter()`` serves with
what the PEPs' own headers say, read here by a plain line reader (``PepLabels``; never by the
code under test): a PEP is served when its ``Status`` is Final, Active, Accepted or Provisional
(or ``Superseded`` by PEPs none of which is in force yet, a Draft) and no PEP that comes into
force succeeds it, by its own ``Superseded-By`` or by the other's
``Replaces``. Prints served / hidden / mismatched counts, the findings by kind and the time of
each command.

With ``--history COMMIT`` (git only), the deployment first ingests the repository as it was
at ``COMMIT`` (e.g. the last of 2015), then moves the branch to the checkout's HEAD and runs:
nothing still Final at HEAD may be retired, and after ``ingest`` and ``run`` the served set is
compared with HEAD's headers.

    .venv/bin/python -m bench.peps ~/src/peps                       # git connector
    .venv/bin/python -m bench.peps ~/src/peps --connector vault     # the checkout's files
    .venv/bin/python -m bench.peps ~/src/peps --history $(git -C ~/src/peps rev-list -1 \\
        --before=2016-01-01 HEAD)

Outside CI: it needs a clone of the repository (about 750 PEPs, 14k chunks; Qdrant local mode).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path
from typing import Any

PRESET = Path(__file__).resolve().parent.parent / "examples" / "peps" / "reconciler.toml"
SERVED_STATUSES = frozenset({"Final", "Active", "Accepted", "Provisional"})
NEVER_IN_FORCE = frozenset({"Draft", "Deferred", "Withdrawn", "Rejected", "April Fool!"})


# -- labels, from the headers alone -------------------------------------------------------


def pep_headers(path: Path) -> dict[str, str]:
    """The header block of a PEP file: ``Name: value`` lines up to the first blank line."""
    found: dict[str, str] = {}
    last = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            break
        if line[:1] in {" ", "\t"} and last:
            found[last] += " " + line.strip()
            continue
        name, _, value = line.partition(":")
        last = name.strip()
        found[last] = value.strip()
    return found


@dataclass(frozen=True)
class PepLabels:
    """What the headers of a folder of PEPs say: status, successors, and the served set."""

    status: Mapping[int, str]
    #: number -> the numbers that succeed it (its Superseded-By, and every PEP replacing it).
    successors: Mapping[int, frozenset[int]]
    served: frozenset[str]
    #: number -> its ``Created`` date (None when it reads as no date).
    created: Mapping[int, datetime | None] = field(default_factory=dict)

    def in_force_at(self, instant: datetime, source: str = "peps") -> frozenset[str]:
        """What the headers say was in force at ``instant``: PEPs created by then whose
        status is in force or ``Superseded``, none of whose successors that come into force
        (by status) had been created by then."""

        def started(n: int) -> bool:
            created = self.created.get(n)
            return created is not None and created <= instant

        return frozenset(
            f"{source}:pep-{n:04d}"
            for n, status in self.status.items()
            if (status in SERVED_STATUSES or status == "Superseded")
            and started(n)
            and not any(
                self.status[s] not in NEVER_IN_FORCE and started(s) for s in self.successors[n]
            )
        )

    @classmethod
    def of(cls, folder: Path, source: str = "peps") -> PepLabels:
        """The labels of the ``pep-*`` files in ``folder`` or its ``peps/`` (the repository's
        layouts before and since 2022; PEP 0, the index, left out)."""
        headers = {}
        for path in sorted([*folder.glob("peps/pep-*"), *folder.glob("pep-*")]):
            if path.suffix not in {".rst", ".txt"}:
                continue
            found = pep_headers(path)
            if found.get("PEP", "").isdigit() and int(found["PEP"]) != 0:
                headers[int(found["PEP"])] = found
        successors: dict[int, set[int]] = {n: set() for n in headers}
        for number, found in headers.items():
            successors[number].update(
                n for n in _numbers(found.get("Superseded-By", "")) if n in headers
            )
            for old in _numbers(found.get("Replaces", "")):
                if old in headers:
                    successors[old].add(number)
        status = {n: found.get("Status", "") for n, found in headers.items()}
        served = frozenset(
            f"{source}:pep-{n:04d}"
            for n in headers
            if (
                status[n] in SERVED_STATUSES
                # superseded only by successors not in force (a Draft): still the one in force
                or (status[n] == "Superseded" and successors[n])
            )
            and not any(status[s] not in NEVER_IN_FORCE for s in successors[n])
        )
        return cls(
            status=status,
            successors={n: frozenset(s) for n, s in successors.items()},
            served=served,
            created={n: _created(found.get("Created", "")) for n, found in headers.items()},
        )


#: How PEPs write ``Created`` ("05-Jul-2001"; before 2016 also "10-January-2013", "30 Aug
#: 2012"), read here on their own, not through the preset.
CREATED_FORMATS = ("%d-%b-%Y", "%d-%B-%Y", "%d %b %Y", "%d %B %Y")


def _created(text: str) -> datetime | None:
    value = text.split("(", maxsplit=1)[0].strip().rstrip(",")
    for form in CREATED_FORMATS:
        try:
            return datetime.strptime(value, form).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


def _numbers(text: str) -> list[int]:
    return [int(n) for n in re.findall(r"[0-9]+", text)]


# -- a deployment of the preset -------------------------------------------------------------


def write_config(folder: Path, *, connector: str, documents: Path, table_url: str) -> Path:
    """The preset as shipped, with its table, the source's type and path rewritten."""
    text = PRESET.read_text(encoding="utf-8")
    text = re.sub(r'(?m)^url = "sqlite:///reconciler.db"$', f'url = "{table_url}"', text)
    text = re.sub(r'(?m)^type = "vault"$', f'type = "{connector}"', text, count=1)
    text = re.sub(r'(?m)^path = "head"$', f'path = "{documents}"', text, count=1)
    config = folder / "reconciler.toml"
    config.write_text(text, encoding="utf-8")
    return config


def reconciler(config: Path, *args: str) -> tuple[int, Any, float]:
    """Run the console script; (exit code, its JSON output or None, wall seconds)."""
    script = Path(sys.executable).with_name("reconciler")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "reconciler.cli"]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--config", str(config), "--format", "json", *args],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - started
    try:
        data = json.loads(done.stdout) if done.stdout.strip() else None
    except json.JSONDecodeError:
        data = None
    if done.returncode not in {0, 2, 3, 4}:
        sys.exit(f"reconciler {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.returncode, data, seconds


def _payloads(config: Path, scroll_filter: Any, keys: list[str]) -> Iterator[dict[str, Any]]:
    """Every chunk payload (``keys`` only) the filter admits, a page at a time."""
    from reconciler.app.wiring import stores  # noqa: PLC0415 (after the commands: local mode locks)
    from reconciler.settings import load_settings  # noqa: PLC0415

    with stores(load_settings(config)) as opened:
        client = opened.index.client  # type: ignore[attr-defined]
        offset = None
        while True:
            points, offset = client.scroll(
                opened.index.collection,  # type: ignore[attr-defined]
                scroll_filter=scroll_filter,
                limit=1000,
                offset=offset,
                with_payload=keys,
            )
            for point in points:
                yield dict(point.payload or {})
            if offset is None:
                return


def served(config: Path) -> set[str]:
    """doc ids of the chunks ``default_filter()`` returns now."""
    from reconciler import default_filter  # noqa: PLC0415

    return {str(p["doc_id"]) for p in _payloads(config, default_filter(), ["doc_id"])}


#: The five instants between 2001 and today the point-in-time comparison always asks about.
INSTANTS = tuple(datetime(year, 7, 1, tzinfo=UTC) for year in (2001, 2006, 2012, 2018, 2024))
#: Payload keys read to place each chunk in time.
WINDOW_KEYS = ["doc_id", "version_state", "effective_from", "effective_to", "quarantined"]


def windows(config: Path) -> dict[str, set[tuple[str, str, str, bool]]]:
    """doc id -> the (state, effective_from, effective_to, quarantined) its chunks carry."""
    found: dict[str, set[tuple[str, str, str, bool]]] = {}
    for p in _payloads(config, None, WINDOW_KEYS):
        found.setdefault(str(p["doc_id"]), set()).add(
            (
                str(p.get("version_state")),
                str(p.get("effective_from")),
                str(p.get("effective_to")),
                p.get("quarantined") is True,
            )
        )
    return found


def historical_at(config: Path, instant: datetime) -> set[str]:
    """doc ids of the chunks ``default_filter(as_of=instant, include_historical=True)``
    returns: a real scroll."""
    from reconciler import default_filter  # noqa: PLC0415

    chosen = default_filter(instant, include_historical=True)
    return {str(p["doc_id"]) for p in _payloads(config, chosen, ["doc_id"])}


def _admitted(window: tuple[str, str, str, bool], instant: datetime) -> bool:
    """The historical route's terms (docs/retrieval.md), read off one chunk's payload."""
    state, start, end, quarantined = window
    if quarantined or state not in {"current", "unknown", "pending", "superseded", "retired"}:
        return False
    stamp = instant.strftime("%Y-%m-%dT%H:%M:%SZ")
    # RFC 3339 UTC stamps of one width compare as text (the reconciler writes them so).
    return _stamp(start) <= stamp < _stamp(end)


def _stamp(text: str) -> str:
    return text if "." not in text else text.split(".", maxsplit=1)[0] + "Z"


def compare_in_time(config: Path, labels: PepLabels) -> dict[str, Any]:
    """What the historical route admits at each PEP's creation date and at ``INSTANTS``,
    against the headers: a real scroll at each of ``INSTANTS`` (and the payload reading
    checked against it), the payloads read once for the creation dates. A PEP whose status
    never puts it in force (Rejected, Withdrawn...) is on the historical route as published
    and is left out of both sides."""
    never = {f"peps:pep-{n:04d}" for n, s in labels.status.items() if s in NEVER_IN_FORCE}
    by_doc = windows(config)
    instants = sorted({*INSTANTS, *(c for c in labels.created.values() if c is not None)})
    wrong: dict[str, dict[str, list[str]]] = {}
    reading_disagrees = []
    for instant in instants:
        admitted = {doc for doc, ws in by_doc.items() if any(_admitted(w, instant) for w in ws)}
        if instant in INSTANTS and historical_at(config, instant) != admitted:
            reading_disagrees.append(instant.date().isoformat())
        admitted -= never
        expected = set(labels.in_force_at(instant)) - never
        if admitted != expected:
            wrong[instant.date().isoformat()] = {
                "admitted, not in force": sorted(admitted - expected),
                "in force, not admitted": sorted(expected - admitted),
            }
    return {
        "instants compared": len(instants),
        "instants that disagree": len(wrong),
        "payload reading differs from a real scroll at": reading_disagrees,
        "first disagreements": dict(list(wrong.items())[:8]),
    }


def table_states(config: Path) -> dict[str, str]:
    """doc id -> version_state, from the document table."""
    from sqlalchemy import create_engine, text  # noqa: PLC0415

    from reconciler.settings import load_settings  # noqa: PLC0415

    engine = create_engine(load_settings(config).table.resolved_url())
    try:
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT doc_id, version_state FROM documents"))
            return {str(doc_id): str(state) for doc_id, state in rows}
    finally:
        engine.dispose()


def snapshot_of(repo: Path, commit: str, into: Path) -> Path:
    """The files of ``commit`` in ``into`` (``git archive``), for its labels."""
    data = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", commit],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=BytesIO(data)) as archive:
        archive.extractall(into, filter="data")
    return into


def compare(config: Path, labels: PepLabels) -> dict[str, Any]:
    got = served(config)
    return {
        "documents (headers)": len(labels.status),
        "documents (table)": len(table_states(config)),
        "served (headers)": len(labels.served),
        "served (reconciler)": len(got),
        "hidden (headers)": len(labels.status) - len(labels.served),
        "served, not in force by the headers": sorted(got - labels.served),
        "in force by the headers, not served": sorted(labels.served - got),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.peps", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("checkout", type=Path, help="a clone of github.com/python/peps")
    parser.add_argument("--connector", choices=["git", "vault"], default="git")
    parser.add_argument("--table", default="sqlite:///reconciler.db", help="the table's URL")
    parser.add_argument("--history", metavar="COMMIT", help="ingest COMMIT first (git only)")
    parser.add_argument("--keep", action="store_true", help="keep the deployment folder")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    checkout = args.checkout.resolve()
    if args.history and args.connector != "git":
        parser.error("--history needs --connector git")
    folder = Path(tempfile.mkdtemp(prefix="bench-peps-"))
    results: dict[str, Any] = {"checkout": str(checkout), "connector": args.connector}
    timings: dict[str, float] = {}
    try:
        documents = checkout
        if args.history:
            documents = folder / "peps.git"
            subprocess.run(
                ["git", "clone", "-q", "--bare", str(checkout), str(documents)], check=True
            )
            head = subprocess.run(
                ["git", "-C", str(checkout), "rev-parse", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            branch = subprocess.run(
                ["git", "-C", str(documents), "symbolic-ref", "HEAD"],
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
            subprocess.run(
                ["git", "-C", str(documents), "update-ref", branch, args.history], check=True
            )
        config = write_config(
            folder, connector=args.connector, documents=documents, table_url=args.table
        )
        findings: Counter[str] = Counter()
        for step in ("init", "ingest", "run", "run again"):
            _, data, timings[step] = reconciler(config, step.split()[0])
            if step == "run" and data:
                findings.update(f"{f['check']}/{f['kind']}" for f in data.get("findings", []))
            if step == "run again" and data:
                results["second run writes"] = data.get("writes")
        if args.history:
            old = PepLabels.of(snapshot_of(checkout, args.history, folder / "then"))
            results["at COMMIT"] = compare(config, old)
            subprocess.run(["git", "-C", str(documents), "update-ref", branch, head], check=True)
            code, data, timings["run after the move"] = reconciler(config, "run")
            if code == 3:  # the guard refused a change this large: as an operator, force it
                results["run after the move"] = "refused by the guard (exit 3); forced"
                _, data, timings["run --force after the move"] = reconciler(
                    config, "run", "--force"
                )
            if data:
                results["findings after the move"] = dict(
                    Counter(f"{f['check']}/{f['kind']}" for f in data.get("findings", []))
                )
            labels = PepLabels.of(checkout)
            final = {f"peps:pep-{n:04d}" for n, s in labels.status.items() if s == "Final"}
            states = table_states(config)
            results["Final at HEAD, retired after the move"] = sorted(
                d for d, s in states.items() if s == "retired" and d in final
            )
            for step in ("ingest", "run"):
                code, _, timings[f"{step} at HEAD"] = reconciler(config, step)
                if code == 3:
                    results[f"{step} at HEAD"] = "refused by the guard (exit 3); forced"
                    _, _, timings[f"{step} --force at HEAD"] = reconciler(config, step, "--force")
        results["findings of the first run"] = dict(sorted(findings.items()))
        results["compared"] = compare(config, PepLabels.of(checkout))
        results["compared in time"] = compare_in_time(config, PepLabels.of(checkout))
        results["seconds"] = {k: round(v, 2) for k, v in timings.items()}
    finally:
        if args.keep:
            print(f"deployment kept in {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    _print(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    mismatched = results["compared"]
    return (
        1
        if mismatched["served, not in force by the headers"]
        or mismatched["in force by the headers, not served"]
        or results["compared in time"]["instants that disagree"]
        else 0
    )


def _print(results: Mapping[str, Any], indent: str = "") -> None:
    for key, value in results.items():
        if isinstance(value, Mapping):
            print(f"{indent}{key}:")
            _print(value, indent + "  ")
        else:
            print(f"{indent}{key:<40} {value}")


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
