"""The watch polls an HTTP registry and a SQL table at their ``poll_interval``: a conditional
request (the registry's ``ETag``, answered 304) or the table's ``updated_at`` watermark says
whether anything changed, and only then is the source read and the changed documents
reconciled; a source without ``poll_interval`` is left to the scheduled jobs."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from acceptance_kit import Deployment
from prometheus_client import CollectorRegistry
from pytest_httpserver import HTTPServer
from registry_kit import FakeRegistry
from watch_kit import POLLED_TABLE, polled_deployment, polled_sources, sql

from reconciler.app.polling import PolledWatch
from reconciler.app.watching import Watch
from reconciler.clock import ManualClock
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.watermarks import SqlWatchMarks, WatchMark


def test_polled_sources_are_read_when_their_probe_says_so(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    dep, registry, db = polled_deployment(tmp_path, httpserver, 'poll_interval = "1m"')
    assert {"reg:RUN-1", "reg:OPS-1", "dms:1"} <= dep.served()
    clock = ManualClock(datetime.now(UTC))
    watch = Watch(dep.settings, CollectorRegistry(), clock=clock)
    polled = {w.name: w for w in watch.sources if isinstance(w, PolledWatch)}
    assert set(polled) == {"reg", "dms"}
    watch.open()
    try:
        watch.tick()  # the first polls: where each source stands (their first marks)
        bodies = [h for h in registry.hits if h.startswith("body:")]
        first = _marks(dep)
        assert set(first) == {"hb", "reg", "dms"}
        assert first["reg"].mark is not None
        assert first["dms"].mark is not None
        clock.advance(60)
        watch.tick()  # nothing changed: the registry answers 304, the watermark holds
        assert registry.hits[-1] == "not modified"
        assert [h for h in registry.hits if h.startswith("body:")] == bodies  # no scan
        assert _marks(dep) == first  # (an idle poll writes nothing)
        registry.update("RUN-1", status="retired")
        sql(db, "UPDATE controlled SET state_code = 'W', changed = 2 WHERE doc_no = 1")
        clock.advance(30)
        watch.tick()  # (not yet: a minute between polls)
        assert not polled["reg"].batch.paths
        clock.advance(30)
        watch.tick()
        served = dep.served()
        assert "reg:RUN-1" not in served
        assert "dms:1" not in served
        assert "reg:OPS-1" in served
    finally:
        watch.stop()


def test_without_poll_interval_a_polled_source_is_not_followed(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    registry = FakeRegistry(etags=True)
    url = registry.serve(httpserver)
    db = tmp_path / "dms.db"
    sql(db, POLLED_TABLE)
    dep = Deployment(tmp_path / "dep")
    dep.configure(source_extra=polled_sources(url, f"sqlite:///{db}", ""))
    watch = Watch(dep.settings, CollectorRegistry())
    assert [w.name for w in watch.sources] == ["hb"]


def test_a_source_that_cannot_tell_is_read_each_poll_and_its_mark_written_once(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    dep, registry, _db = polled_deployment(
        tmp_path, httpserver, 'poll_interval = "1m"', etags=False
    )
    clock = ManualClock(datetime.now(UTC))
    watch = Watch(dep.settings, CollectorRegistry(), clock=clock)
    watch.open()
    try:
        watch.tick()
        first = _marks(dep)
        lists = registry.hits.count("page:1")
        for _ in range(2):
            clock.advance(60)
            watch.tick()  # (no validator: the registry is read, nothing changed)
        assert registry.hits.count("page:1") >= lists + 2
        assert _marks(dep) == first  # (an idle poll writes nothing: a counterexample)
    finally:
        watch.stop()


def test_a_class_or_title_changed_alone_is_a_change(tmp_path: Path, httpserver: HTTPServer) -> None:
    """A registry entry's ``doc_class`` (then its ``title``) changed alone, its hash, version,
    state and dates as they were: the validator moves, and the watch compares those fields
    too, so the row and the chunks' payload follow at the next poll, not at the full job."""
    dep, registry, _db = polled_deployment(tmp_path, httpserver, 'poll_interval = "1m"')
    clock = ManualClock(datetime.now(UTC))
    watch = Watch(dep.settings, CollectorRegistry(), clock=clock)
    polled = {w.name: w for w in watch.sources if isinstance(w, PolledWatch)}
    watch.open()
    try:
        watch.tick()
        registry.update("OPS-1", doc_class="archive")
        clock.advance(60)
        watch.tick()
        assert not polled["reg"].batch.paths
        assert dep.rows()["reg:OPS-1"]["doc_class"] == "archive"
        classes = {p["doc_id"]: p.get("doc_class") for p in dep.points().payloads.values()}
        assert classes["reg:OPS-1"] == "archive"
        registry.update("OPS-1", title="Operations")
        clock.advance(60)
        watch.tick()
        assert not polled["reg"].batch.paths
        assert dep.rows()["reg:OPS-1"]["title"] == "Operations"
        assert "reg:OPS-1" in dep.served()
    finally:
        watch.stop()


def test_a_row_counter_moved_below_the_greatest_is_a_change(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    """``updated_at`` a row version counter (``changed``): row 1 withdrawn, its counter 1 -> 2
    while row 2's is 5. The maximum and the count hold; the counters' sum moves, and the
    next poll reconciles it (a counterexample: it waited for the full job)."""
    row = "2, 'ops', 1, 'A', '2024-01-01', '# O\n\nY.', 5"
    dep, _registry, db = polled_deployment(tmp_path, httpserver, 'poll_interval = "1m"', row)
    assert {"dms:1", "dms:2"} <= dep.served()
    clock = ManualClock(datetime.now(UTC))
    watch = Watch(dep.settings, CollectorRegistry(), clock=clock)
    watch.open()
    try:
        watch.tick()
        sql(db, "UPDATE controlled SET state_code = 'W', changed = 2 WHERE doc_no = 1")
        clock.advance(60)
        watch.tick()
        served = dep.served()
        assert "dms:1" not in served
        assert "dms:2" in served
    finally:
        watch.stop()


def _marks(dep: Deployment) -> dict[str, WatchMark]:
    table = SqlDocumentTable.from_url(dep.settings.table.resolved_url())
    try:
        return SqlWatchMarks.of(table).marks()
    finally:
        table.close()
