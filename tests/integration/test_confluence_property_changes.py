"""A property a page declares by (its start or end date, its document class) changed alone
on a page that carries the supersession label, with no edit and no label moved: Confluence
makes no new version and no new modification date, but the probe's label search expands
those properties too, so the token moves, the watch reads that page (and the successor it
names) by id, not the site, and the run reconciles that page's family only. Against the real
local HTTP server shaped like Confluence; counted by its request log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from acceptance_kit import Deployment
from pytest_httpserver import HTTPServer
from test_confluence_changes import _site, changes, expenses, next_poll
from test_confluence_connector import (  # noqa: F401  (credentials: the autouse fixture)
    FakeConfluence,
    FakePage,
    credentials,
    make_source,
)
from test_confluence_probe import CONFLUENCE, first_poll


@pytest.mark.parametrize("flavor", ["cloud", "datacenter"])
@pytest.mark.parametrize(
    ("key", "value", "field", "read"),
    [
        ("effective_to", "2024-06-30", "effective_to", datetime(2024, 6, 30, tzinfo=UTC)),
        ("doc_class", "archive", "doc_class", "archive"),
        ("effective_from", "2023-03-01", "effective_from", datetime(2023, 3, 1, tzinfo=UTC)),
    ],
)
def test_a_date_or_class_changed_alone_is_read_with_its_successors_only(
    httpserver: HTTPServer, flavor: str, key: str, value: str, field: str, read: object
) -> None:
    site = _site(httpserver, flavor, 12)
    expenses(site, doc_class="policy")
    source = make_source(site, page_size=5)
    before = source.probe(None)
    source.scan()
    site.pages["201"].properties[key] = value
    now = source.probe(before)
    assert now != before
    found, pages = changes(site, source, before, now)
    assert getattr(found["201"], field) == read
    assert found["201"].superseded_by == "wiki:202"
    assert pages == {"201", "202", "203"}  # (it, and its successors)
    # the probe again at that state: nothing moved, nothing read
    assert changes(site, source, now, source.probe(now)) == ({}, set())


def test_the_watch_reconciles_a_date_or_class_changed_alone(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    """serve's watch, a Data Center site: a page labelled superseded without a pointer (its
    label a warning: it stays current, served) is given an end date in the past alone; the
    next poll reads that page only (not the site) and it leaves the served set. Then the
    2023 policy's class is changed alone: that page and its successor are read, and its
    chunks' payload carries the new class; no other family is read."""
    site = _site(httpserver, "datacenter", 12)
    expenses(site, doc_class="policy")
    site.pages["305"].labels.append("superseded")  # (no pointer: stays current)
    dep = Deployment(tmp_path / "dep")
    dep.configure(source_extra=CONFLUENCE.format(url=site.url))
    dep.init_ingest()
    assert {"wiki:203", "wiki:305", "wiki:306"} <= dep.served()
    watch, polled, clock = first_poll(dep)
    try:
        yesterday = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        site.pages["305"].properties["effective_to"] = yesterday
        assert next_poll(site, watch, polled, clock) == {"305"}
        served = dep.served()
        assert "wiki:305" not in served
        assert {"wiki:203", "wiki:306", "wiki:300"} <= served
        assert dep.rows()["wiki:305"]["effective_to"] == datetime.fromisoformat(yesterday)

        site.pages["201"].properties["doc_class"] = "archive"
        assert {"201", "202"} <= next_poll(site, watch, polled, clock) <= {"201", "202", "203"}
        assert {k: dep.rows()[f"wiki:{k}"]["doc_class"] for k in ("201", "202")} == {
            "201": "archive",
            "202": "policy",
        }
        classes = {p["doc_id"]: p.get("doc_class") for p in dep.points().payloads.values()}
        assert classes["wiki:201"] == "archive"
        assert classes["wiki:202"] == "policy"
        assert {"wiki:203", "wiki:306", "wiki:300"} <= dep.served()
    finally:
        watch.stop()
