"""What the watch reads of a Confluence source when its token moves, against the real local
HTTP server shaped like Confluence (it answers the CQL it is sent: ``lastmodified >=
now("-Nm")`` by its pages' dates, ``title = "…"`` by their titles): the pages changed since
the last read (the last-modified search), and for the run the pages of their families (by
title), not the whole site; a page trashed or deleted, which no modification shows, has the
site read whole, as is a page labelled superseded (no new version: the probe's label search
sees it). Counted by the server's request log: the per-page requests (properties) name the
pages read."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from acceptance_kit import Deployment
from pytest_httpserver import HTTPServer
from test_confluence_connector import (  # noqa: F401  (credentials: the autouse fixture)
    FakeConfluence,
    FakePage,
    credentials,
    make_source,
)
from test_confluence_probe import CONFLUENCE, first_poll

from connectors.confluence import ConfluenceSource
from reconciler.app.polling import PolledWatch
from reconciler.app.watching import Watch
from reconciler.clock import ManualClock
from reconciler.model import SourceDocument

#: The requests that read one page each (its properties), by page id.
PER_PAGE = r"/(?:wiki/api/v2/pages|confluence/rest/api/content)/([0-9]+)/propert(?:y|ies)"
#: The listings of a whole space (a full read).
WHOLE = r"/(wiki/api/v2/pages|confluence/rest/api/content)"


def _iso(when: datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.000Z")


def _pages_read(site: FakeConfluence, since: int) -> set[str]:
    return {
        found.group(1)
        for path, _ in site.requests[since:]
        if (found := re.fullmatch(PER_PAGE, path)) is not None
    }


def _whole(site: FakeConfluence, since: int) -> int:
    return sum(
        1
        for path, args in site.requests[since:]
        if re.fullmatch(WHOLE, path) and "id" not in args and "title" not in args
    )


def _site(httpserver: HTTPServer, flavor: str, count: int) -> FakeConfluence:
    site = FakeConfluence(httpserver, flavor)
    for number in range(count):
        page, old = str(300 + number), _iso(datetime.now(UTC) - timedelta(days=30 - number))
        site.add(FakePage(page, f"Note {number}", f"<p>note {number}</p>", when=old))
    return site


@pytest.mark.parametrize("flavor", ["cloud", "datacenter"])
def test_one_page_changed_among_many_is_the_only_page_read(
    httpserver: HTTPServer, flavor: str
) -> None:
    site = _site(httpserver, flavor, 30)
    source = make_source(site, page_size=10)
    before = source.probe(None)
    assert len(source.scan().documents) == 30
    edited = site.pages["317"]
    edited.body, edited.version, edited.when = "<p>edited</p>", 2, _iso(datetime.now(UTC))
    now = source.probe(before)
    assert now != before
    asked = len(site.requests)
    changed = source.changed_since(before, now)
    assert changed is not None
    assert [d.source_key for d in changed.documents] == ["317"]
    assert changed.documents[0].version == 2
    assert _pages_read(site, asked) == {"317"}
    assert _whole(site, asked) == 0
    assert source.changed_at("317") == datetime.fromisoformat(edited.when)


@pytest.mark.parametrize("flavor", ["cloud", "datacenter"])
def test_a_page_gone_or_a_token_unread_has_the_site_read_whole(
    httpserver: HTTPServer, flavor: str
) -> None:
    site = _site(httpserver, flavor, 5)
    source = make_source(site)
    before = source.probe(None)
    source.scan()
    assert source.changed_since(before, before) is not None  # (nothing changed: nothing read)
    del site.pages["302"]  # (deleted: no modification shows it, the count does)
    assert source.changed_since(before, source.probe(before)) is None
    assert source.changed_since("etag-1", before) is None
    site.pages["303"].status = "trashed"
    site.add(FakePage("399", "New", "<p>n</p>", when=_iso(datetime.now(UTC))))
    # one trashed, one added: the count alone did not move, the page new to it says it
    assert source.changed_since(before, source.probe(before)) is None


@pytest.mark.parametrize("flavor", ["cloud", "datacenter"])
def test_the_pages_at_some_paths_are_found_by_title(httpserver: HTTPServer, flavor: str) -> None:
    site = _site(httpserver, flavor, 12)
    site.add(FakePage("390", 'Say "hi" \\ bye', "<p>q</p>"))
    source = make_source(site, page_size=5)
    whole = {d.source_key: d for d in source.scan().documents}
    paths = {whole["305"].path, whole["390"].path}
    asked = len(site.requests)
    read = source.scan_paths(paths)
    assert {d.source_key for d in read.documents} == {"305", "390"}
    assert {d.source_key: d for d in read.documents}["390"] == whole["390"]
    assert _pages_read(site, asked) == {"305", "390"}
    assert _whole(site, asked) == 0
    site.pages["305"].title = "Renamed"  # (its old path finds no page: read whole, kept)
    asked = len(site.requests)
    read = source.scan_paths(paths)
    assert {d.source_key for d in read.documents} == {"390"}
    assert _whole(site, asked) > 0


def test_the_watch_reads_the_changed_page_and_its_family_then_a_deletion_whole(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    site = _site(httpserver, "datacenter", 12)
    old = _iso(datetime.now(UTC) - timedelta(days=30))
    site.add(
        FakePage(
            "201",
            "Expenses 2024",
            "<p>Meals up to 40 EUR.</p>",
            when=old,
            labels=["superseded"],
            properties={"superseded_by": "202", "effective_from": "2024-01-01"},
        ),
        FakePage(
            "202",
            "Expenses 2025",
            "<p>Meals up to 55 EUR.</p>",
            when=old,
            properties={"effective_from": "2025-01-01"},
        ),
    )
    dep = Deployment(tmp_path / "dep")
    dep.configure(
        source_extra=CONFLUENCE.format(url=site.url), policy={"missing_in_source_grace": "0s"}
    )
    dep.init_ingest()
    assert {"wiki:202", "wiki:300", "wiki:311"} <= dep.served()
    assert "wiki:201" not in dep.served()
    watch, polled, clock = first_poll(dep)
    try:
        # the 2025 policy starts later: that page is listed, its family (2024, whose window
        # closes at its start) read with it
        edited = site.pages["202"]
        edited.properties["effective_from"] = "2025-02-01"
        edited.version, edited.when = 2, _iso(datetime.now(UTC))
        asked = len(site.requests)
        clock.advance(60)
        watch.tick()
        assert not polled.batch.paths
        assert _pages_read(site, asked) <= {"201", "202"}
        assert "202" in _pages_read(site, asked)
        assert _whole(site, asked) == 0
        served = dep.served()
        assert {"wiki:202", "wiki:300", "wiki:311"} <= served
        assert "wiki:201" not in served
        rows = dep.rows()
        assert rows["wiki:202"]["doc_version"] == 2
        assert rows["wiki:201"]["effective_to"] == datetime(2025, 2, 1, tzinfo=UTC)
        # a page labelled superseded (its pointer set): no new version, no new date; the
        # label search in the probe sees it, and the site is read whole
        site.pages["305"].labels.append("superseded")
        site.pages["305"].properties["superseded_by"] = "306"
        asked = len(site.requests)
        clock.advance(60)
        watch.tick()
        assert _whole(site, asked) > 0
        assert not polled.batch.paths
        assert dep.rows()["wiki:305"]["version_state"] == "superseded"
        assert "wiki:305" not in dep.served()
        # a page deleted: no modification shows it, the count does; the site is read whole
        del site.pages["310"]
        asked = len(site.requests)
        clock.advance(60)
        watch.tick()
        assert _whole(site, asked) > 0
        assert not polled.batch.paths
        served = dep.served()
        assert "wiki:310" not in served  # (no grace here: retired at once)
        assert {"wiki:202", "wiki:300", "wiki:311"} <= served
    finally:
        watch.stop()


@pytest.mark.parametrize("flavor", ["cloud", "datacenter"])
def test_a_successor_property_changed_alone_is_read_with_its_successor_only(
    httpserver: HTTPServer, flavor: str
) -> None:
    """A labelled page's successor property set (it had none: its label was a warning) or
    pointed elsewhere, with no edit and no label moved: the probe's label search sees it,
    and ``changed_since`` reads that page by id, with the successor it names (so that the
    pointer resolves as a scan resolves it), and no other page."""
    site = _site(httpserver, flavor, 12)
    site.pages["305"].labels.append("superseded")  # (no pointer yet)
    source = make_source(site, page_size=5)
    before = source.probe(None)
    whole = {d.source_key: d for d in source.scan().documents}
    assert whole["305"].superseded_by is None
    site.pages["305"].properties["superseded_by"] = "306"
    now = source.probe(before)
    assert now != before
    read, pages = changes(site, source, before, now)
    assert read["305"].superseded_by == "wiki:306"
    assert read["305"].state.value == "superseded"
    assert pages == {"305", "306"}
    # pointed elsewhere: read again; then, the probe again at that state, nothing is read
    site.pages["305"].properties["superseded_by"] = {"id": "307"}
    later = source.probe(now)
    read, pages = changes(site, source, now, later)
    assert read["305"].superseded_by == "wiki:307"
    assert pages == {"305", "307"}
    assert changes(site, source, later, source.probe(later)) == ({}, set())


def test_the_watch_reconciles_a_successor_property_changed_alone(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    """serve's watch, a Data Center site: the expenses policy of 2023 points to 2024's,
    which points to 2025's; 2023's pointer is then set to 2025's alone (no edit, no label
    moved). The next poll sees it, reads that page and its successor (not the site), and the
    run that follows reconciles their family, read by its pages' titles: 2023 is superseded
    by 2025 now."""
    site = _site(httpserver, "datacenter", 12)
    expenses(site)
    dep = Deployment(tmp_path / "dep")
    dep.configure(source_extra=CONFLUENCE.format(url=site.url))
    dep.init_ingest()
    assert dep.rows()["wiki:201"]["superseded_by"] == "wiki:202"
    watch, polled, clock = first_poll(dep)
    try:
        site.pages["201"].properties["superseded_by"] = "203"
        read = next_poll(site, watch, polled, clock)
        assert read <= {"201", "202", "203"}
        assert {"201", "203"} <= read
        rows = dep.rows()
        assert rows["wiki:201"]["superseded_by"] == "wiki:203"
        assert rows["wiki:201"]["version_state"] == "superseded"
        assert {"wiki:203", "wiki:300", "wiki:311"} <= dep.served()
        assert not {"wiki:201", "wiki:202"} & dep.served()
    finally:
        watch.stop()


def expenses(site: FakeConfluence, **properties: str) -> None:
    """The expenses policies of 2023, 2024 and 2025, each superseded by the next (label and
    pointer), each starting on its year's first day, dated a month ago; ``properties`` on
    each too."""
    old = _iso(datetime.now(UTC) - timedelta(days=30))
    for page, year, successor in (("201", 2023, "202"), ("202", 2024, "203"), ("203", 2025, None)):
        site.add(
            FakePage(
                page,
                f"Expenses {year}",
                f"<p>Meals up to {year - 1985} EUR.</p>",
                when=old,
                labels=["superseded"] if successor else [],
                properties={"effective_from": f"{year}-01-01", **properties}
                | ({"superseded_by": successor} if successor else {}),
            )
        )


def next_poll(
    site: FakeConfluence, watch: Watch, polled: PolledWatch, clock: ManualClock
) -> set[str]:
    """The watch's next poll, a minute on: the ids of the pages it read one by one (the site
    not read whole, the run done: nothing left pending)."""
    asked = len(site.requests)
    clock.advance(60)
    watch.tick()
    assert not polled.batch.paths
    assert _whole(site, asked) == 0
    return _pages_read(site, asked)


def changes(
    site: FakeConfluence, source: ConfluenceSource, before: str | None, now: str | None
) -> tuple[dict[str, SourceDocument], set[str]]:
    """What ``changed_since`` reads (it can tell: the site not read whole), by source key,
    and the ids of the pages it read one by one."""
    asked = len(site.requests)
    changed = source.changed_since(before, now)
    assert changed is not None
    assert _whole(site, asked) == 0
    return {d.source_key: d for d in changed.documents}, _pages_read(site, asked)
