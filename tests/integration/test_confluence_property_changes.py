"""A property a page declares by (its start or end date, its document class) changed alone
on a page that carries the supersession label, with no edit and no label moved: Confluence
makes no new version and no new modification date, but the probe's label search expands
those properties too, so the token moves, the watch reads that page (and the successor it
names) by id, not the site, and the run reconciles that page's family only. Against the real
local HTTP server shaped like Confluence; counted by its request log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples
from pytest_httpserver import HTTPServer
from test_confluence_changes import _site, changes, expenses, next_poll
from test_confluence_connector import (  # noqa: F401  (credentials: the autouse fixture)
    FakeConfluence,
    FakePage,
    corpus,
    credentials,
    make_source,
)
from test_confluence_probe import CONFLUENCE, first_poll

from connectors.confluence.probing import marks_print
from reconciler.app.polling import PolledWatch
from reconciler.app.watching import Watch
from reconciler.clock import ManualClock


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
        ended_alone(site, dep, (watch, polled, clock))
        assert "wiki:203" in dep.served()

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


#: The properties a page declares by, with the default names.
KEYS = ("superseded_by", "effective_from", "effective_to", "doc_class")
#: A property's value: any JSON (a content property holds any), null read as absent.
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=6,
)


@pytest.mark.parametrize("flavor", ["cloud", "datacenter"])
@settings(max_examples=examples(20), suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    first=st.dictionaries(st.sampled_from(KEYS), _JSON),
    key=st.sampled_from(KEYS),
    value=_JSON,
)
def test_the_probe_reads_a_labelled_pages_properties_as_the_scan_declares_them(
    httpserver: HTTPServer, flavor: str, first: dict[str, Any], key: str, value: Any
) -> None:
    """Whatever a labelled page's properties hold (any JSON, null, absent), the probe's label
    search prints them as the scan's declaration does: after a read the token holds and
    nothing is read again (no page read at every poll); one of them changed alone to another
    value moves the token, and that page is read (not the site), after which the two agree
    again."""
    httpserver.clear()
    site = FakeConfluence(httpserver, flavor)
    site.add(*corpus())
    site.pages["101"].properties = dict(first)  # (labelled: Expenses 2024)
    assume(marks_print({key: value}, KEYS) != marks_print({key: first.get(key)}, KEYS))
    source = make_source(site)
    before = source.probe(None)
    source.scan()
    assert changes(site, source, before, source.probe(before)) == ({}, set())
    site.pages["101"].properties[key] = value
    now = source.probe(before)
    assert now != before
    read, pages = changes(site, source, before, now)
    assert "101" in read
    assert "101" in pages
    assert changes(site, source, now, source.probe(now)) == ({}, set())


@pytest.mark.parametrize("flavor", ["cloud", "datacenter"])
def test_with_watch_properties_all_a_page_without_the_label_is_followed_too(
    httpserver: HTTPServer, flavor: str
) -> None:
    """``watch_properties = "all"``: the probe's second search lists the whole scope (a
    request per ``page_size`` pages), labels and properties expanded, so an end date set
    alone on a page without the label moves the token and that page alone is read; the
    label put on a page still moves it (the label digest, from the labels read)."""
    site = _site(httpserver, flavor, 12)
    expenses(site)
    source = make_source(site, page_size=5, watch_properties="all")
    asked = len(site.requests)
    before = source.probe(None)
    listed = [args for path, args in site.requests[asked:] if path.endswith("/content/search")]
    assert len(listed) == 3  # (15 pages, 5 a request)
    assert "label" not in listed[0]["cql"]
    assert "metadata.labels" in listed[0]["expand"].split(",")
    source.scan()
    assert changes(site, source, before, source.probe(before)) == ({}, set())
    site.pages["305"].properties["effective_to"] = "2024-06-30"
    now = source.probe(before)
    assert now != before
    read, pages = changes(site, source, before, now)
    assert read["305"].effective_to == datetime(2024, 6, 30, tzinfo=UTC)
    assert pages == {"305"}
    assert changes(site, source, now, source.probe(now)) == ({}, set())
    site.pages["306"].labels.append("superseded")
    labelled = source.probe(now)
    assert labelled != now
    assert source.changed_since(now, labelled) is None  # (the label moved: read whole)
    site.pages["306"].labels.remove("superseded")
    assert source.probe(labelled) == now


def test_the_watch_follows_every_pages_end_date_where_asked(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    """serve's watch with ``watch_properties = "all"``: a current page without the label is
    given an end date in the past alone; the next poll reads that page only, and it leaves
    the served set."""
    site = _site(httpserver, "datacenter", 12)
    dep = Deployment(tmp_path / "dep")
    dep.configure(source_extra=CONFLUENCE.format(url=site.url) + 'watch_properties = "all"\n')
    dep.init_ingest()
    assert {"wiki:305", "wiki:306"} <= dep.served()
    watch, polled, clock = first_poll(dep)
    try:
        ended_alone(site, dep, (watch, polled, clock))
    finally:
        watch.stop()


def ended_alone(
    site: FakeConfluence, dep: Deployment, watching: tuple[Watch, PolledWatch, ManualClock]
) -> None:
    """Page 305 given an end date in the past alone (no edit): the watch's next poll reads
    that page only, its row ends then, and it leaves the served set (its neighbours stay)."""
    yesterday = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    site.pages["305"].properties["effective_to"] = yesterday
    assert next_poll(site, *watching) == {"305"}
    served = dep.served()
    assert "wiki:305" not in served
    assert {"wiki:300", "wiki:306"} <= served
    assert dep.rows()["wiki:305"]["effective_to"] == datetime.fromisoformat(yesterday)
