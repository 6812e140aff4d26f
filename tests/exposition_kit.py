"""Metrics as the product exports them, for the tests of the alert rules and the dashboard.

A real cron ``reconciler run`` writes its node_exporter textfile and a real ``reconciler serve``
answers ``/metrics``; each reading is an ``Exposition``. ``input_series`` lays readings on a
timeline (each stands for some minutes, as Prometheus would keep scraping it) and turns them
into promtool ``input_series``: the metric names, labels and values are the product's, so a
renamed metric or label fails the alert tests instead of passing on a hand-typed copy.

promtool's clock starts at 0 (1970), so timestamps are moved onto it: a ``*_timestamp_seconds``
value becomes its age relative to the instant the first reading of the timeline was taken.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import requests
from acceptance_kit import Deployment, body, day, instant
from prometheus_client.parser import text_string_to_metric_families
from qdrant_client import models
from sqlalchemy import create_engine, make_url, text

from reconciler.app.holding import lease_name
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.lease import make_lease

Labels = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Exposition:
    """One reading of the product's metrics: the text and when it was read."""

    text: str
    read_at: float

    @property
    def samples(self) -> dict[tuple[str, Labels], float]:
        return {
            (sample.name, tuple(sorted(sample.labels.items()))): float(sample.value)
            for family in text_string_to_metric_families(self.text)
            for sample in family.samples
        }

    def value(self, name: str, **labels: str) -> float | None:
        return self.samples.get((name, tuple(sorted(labels.items()))))

    def labels_of(self, name: str) -> list[dict[str, str]]:
        return [dict(labels) for (n, labels) in self.samples if n == name]


def read_textfile(path: Path) -> Exposition:
    return Exposition(path.read_text(encoding="utf-8"), time.time())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _selector(name: str, labels: Labels) -> str:
    inner = ", ".join(f'{k}="{v}"' for k, v in labels)
    return f"{name}{{{inner}}}"


def input_series(
    timeline: list[tuple[Exposition | None, int]], *, instance: str
) -> list[dict[str, str]]:
    """promtool input series (1m interval) for readings that each stand ``minutes`` long; a
    ``None`` reading is a stretch with no metrics at all (the exporter is gone)."""
    first = next(reading for reading, _ in timeline if reading is not None)
    keys: list[tuple[str, Labels]] = []
    for reading, _ in timeline:
        for key in reading.samples if reading is not None else ():
            if key not in keys:
                keys.append(key)
    series = []
    for name, labels in keys:
        values: list[str] = []
        for reading, minutes in timeline:
            value = reading.samples.get((name, labels)) if reading is not None else None
            if value is not None and name.endswith("_timestamp_seconds"):
                value -= first.read_at
            if value is None:
                values.append(f"_x{minutes}")
            else:
                values.append(repr(value) if minutes == 1 else f"{value!r}x{minutes - 1}")
        series.append(
            {
                "series": _selector(name, (*labels, ("instance", instance))),
                "values": " ".join(values),
            }
        )
    return series


def metrics_config(dep: Deployment, text: str) -> None:
    """Append a ``[metrics]`` table (or any tables) to the deployment's config."""
    dep.config.write_text(dep.config.read_text() + text)


def cron_readings(root: Path) -> dict[str, Exposition]:
    """The textfile of real cron ``run``s through a deployment's life: a good run, a drifted
    corpus the guard refuses, three failed runs, an unreadable source, past its TTL."""
    dep = Deployment(root)
    dep.family("expenses", 2)
    dep.note("welcome", id="welcome", status="current", effective_from=day(-500))
    dep.init_ingest()
    textfile = root / "textfile" / "reconciler.prom"
    textfile.parent.mkdir()
    tail = f'[metrics]\ntextfile = "{textfile}"\n'

    def run(*args: str, code: int) -> Exposition:
        result = dep.cli("run", *args)
        assert result.exit_code == code, result.output
        return read_textfile(textfile)

    metrics_config(dep, tail)
    readings = {"ok": run(code=0)}

    # Drift: two versions of a policy both current (live siblings once ingested), an in-place
    # edit, a successor the pipeline never ingested; a strict guard refuses the repair.
    for v, start in (("1", -300), ("2", -30)):
        dep.note(
            f"policy-v{v}",
            id=f"policy-v{v}",
            family="policy",
            version=v,
            status="current",
            effective_from=day(start),
        )
    code, data = dep.json("ingest")
    assert code == 0, data
    dep.note(
        "welcome",
        body("welcome", "Edited in place."),
        id="welcome",
        status="current",
        effective_from=day(-500),
    )
    dep.edit_front("expenses-v2", status="superseded", superseded_by="expenses-v3")
    dep.note(
        "expenses-v3",
        id="expenses-v3",
        family="expenses",
        version="3",
        status="current",
        effective_from=day(-10),
    )
    # ... an index that lost the chunks of one document, and a chunk of another text.
    with dep.stores() as opened:
        index = opened.index
        assert isinstance(index, QdrantChunkIndex)
        lost = [state.point_id for state in index.scroll() if state.doc_id == "hb:expenses-v1"]
        assert lost
        index.client.delete(index.collection, points_selector=models.PointIdsList(points=lost))
        [stale, *_] = [s.point_id for s in index.scroll() if s.doc_id == "hb:expenses-v2"]
        index.client.set_payload(
            index.collection, payload={"content_hash": "sha256:an-older-text"}, points=[stale]
        )
    dep.configure(fraction=0.01)
    metrics_config(dep, "floor = 0\n" + tail)
    readings["refused"] = run(code=3)

    # A run that fails: the collection it reconciles is gone.
    config = dep.config.read_text()
    dep.config.write_text(config.replace('collection = "corpus"', 'collection = "gone"'))
    for n in (1, 2, 3):
        readings[f"failed{n}"] = run(code=1)
    dep.config.write_text(config)

    # The source cannot be read, then stays so past its TTL (24h by default).
    dep.configure()
    metrics_config(dep, tail)
    dep.vault.rename(root / "vault.away")
    # Exit 4: the run completed, but the source was not read (status "partial").
    readings["source_down"] = run(code=4)
    readings["ttl_expired"] = run("--now", instant(2), code=4)
    return readings


def start_serve(dep: Deployment, log_path: Path) -> subprocess.Popen[bytes]:
    """A real ``reconciler serve --run-now`` (log level info), its output appended to
    ``log_path``."""
    command = [sys.executable, "-m", "reconciler.cli", "--config", str(dep.config)]
    with log_path.open("ab") as log:
        return subprocess.Popen(
            [*command, "--log-level", "info", "serve", "--run-now"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def scrape_until(
    port: int,
    test: Callable[[Exposition], bool],
    proc: subprocess.Popen[bytes],
    log_path: Path,
    *,
    seconds: float = 90,
) -> Exposition:
    """Scrape serve's ``/metrics`` until a reading passes ``test`` (``seconds`` at most)."""
    url = f"http://127.0.0.1:{port}/metrics"
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert proc.poll() is None, log_path.read_text()
        try:
            reading = Exposition(requests.get(url, timeout=2).text, time.time())
        except requests.RequestException:
            reading = None
        if reading is not None and test(reading):
            return reading
        time.sleep(0.3)
    raise AssertionError(f"serve exported no such reading in {seconds:g}s: {log_path.read_text()}")


@contextmanager
def _serving(
    dep: Deployment, port: int
) -> Iterator[Callable[[Callable[[Exposition], bool]], Exposition]]:
    """Run ``reconciler serve --run-now``; yield a function that scrapes ``/metrics`` until a
    reading passes its test (90 s at most); stop serve at the end."""
    log_path = dep.root / "serve.log"
    proc = start_serve(dep, log_path)
    try:
        yield lambda test: scrape_until(port, test, proc, log_path)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _serve_until(dep: Deployment, port: int, ready: str) -> Exposition:
    """Start ``reconciler serve --run-now``; return ``/metrics`` once it has a ``ready``
    sample; stop serve."""
    with _serving(dep, port) as scrape:
        return scrape(lambda reading: bool(reading.labels_of(ready)))


def _served_deployment(
    root: Path, table_url: str = "sqlite:///reconciler.db", *, dates: str = "0 4 1 1 *"
) -> tuple[Deployment, int]:
    """A small ingested deployment for ``serve`` on a free port, its scheduled jobs a year
    away (only ``--run-now``'s full job runs), unless ``dates`` says otherwise."""
    dep = Deployment(root, table_url)
    dep.family("expenses", 2)
    dep.init_ingest()
    port = free_port()
    metrics_config(
        dep,
        f'[metrics]\nlisten = "127.0.0.1:{port}"\n'
        f'[schedule]\nfull = "0 2 1 1 *"\nttl = "0 3 1 1 *"\ndates = "{dates}"\n',
    )
    return dep, port


def table_outage_readings(root: Path, admin_url: str) -> dict[str, Exposition]:
    """``/metrics`` of a real ``reconciler serve`` on PostgreSQL: its full job succeeded
    (``ok``), then its document table went away under it (the database refuses connections,
    and serve's sessions are ended: an outage as the server's clients see one; ``down``), and
    its dates job (every minute) failed during it (``failed``)."""
    name = f"reconciler_outage_{uuid.uuid4().hex[:12]}"
    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        url = make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        dep, port = _served_deployment(root, url, dates="* * * * *")
        with _serving(dep, port) as scrape:
            ok = scrape(lambda reading: bool(reading.labels_of(SUCCESS)))
            with admin.connect() as conn:
                conn.execute(text(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false'))
                conn.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = :n"
                    ),
                    {"n": name},
                )
            down = scrape(lambda reading: reading.value("reconciler_run_log_readable") == 0.0)
            before = down.value(FAILURES, reconciler_job="dates") or 0.0
            failed = scrape(
                lambda reading: (reading.value(FAILURES, reconciler_job="dates") or 0.0) > before
            )
        return {"ok": ok, "down": down, "failed": failed}
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def serve_readings(root: Path) -> dict[str, Exposition]:
    """``/metrics`` of a real ``reconciler serve --run-now``: once while another runner holds
    the lease (its job skips), then once its full job has succeeded."""
    dep, port = _served_deployment(root)
    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    other = make_lease(table.engine, lease_name("0/1"))
    assert other.acquire()
    try:
        skipped = _serve_until(dep, port, "reconciler_lease_skips_total")
    finally:
        other.release()
        table.close()
    return {"skipped": skipped, "ok": _serve_until(dep, port, SUCCESS)}


#: The sample that shows a job succeeded.
SUCCESS = "reconciler_last_success_timestamp_seconds"
#: The counter of failed jobs.
FAILURES = "reconciler_run_failures_total"


def exposition_names(*readings: Exposition) -> dict[str, set[tuple[str, str]]]:
    """Every sample name with the (label, value) pairs it carries, over readings."""
    names: dict[str, set[tuple[str, str]]] = {}
    for reading in readings:
        for name, labels in reading.samples:
            names.setdefault(name, set()).update(labels)
    return names
