"""Confluence's cheap change check, against the real local HTTP server shaped like Confluence:
the probe is two CQL searches (newest modification first, one result, the scope's page count;
the pages that carry the supersession label, the properties a page declares by expanded); its
token holds while nothing changed and moves with an edit, a new page, a page gone, the label
put on or taken off, or a labelled page's successor, dates or class set, changed or removed;
the watch's idle poll of a Confluence source costs those two requests, and a change is read
and reconciled."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

import pytest
from acceptance_kit import Deployment
from prometheus_client import CollectorRegistry
from pytest_httpserver import HTTPServer
from test_confluence_connector import (  # noqa: F401  (credentials: the autouse fixture)
    FakeConfluence,
    FakePage,
    corpus,
    credentials,
    make_source,
    status,
)

from reconciler.app.polling import PolledWatch
from reconciler.app.watching import Watch
from reconciler.clock import ManualClock

SEARCH = r"/(wiki|confluence)/rest/api/search"
#: REST v1's content search (the label search, with the pointers expanded).
LABELLED = r"/(wiki|confluence)/rest/api/content/search"


@pytest.fixture(params=["cloud", "datacenter"])
def site(request: pytest.FixtureRequest, httpserver: HTTPServer) -> FakeConfluence:
    server = FakeConfluence(httpserver, request.param)
    server.add(*corpus())
    return server


def test_the_probe_is_one_search_and_moves_with_each_change(site: FakeConfluence) -> None:
    fake = site
    source = make_source(fake)
    token = source.probe(None)
    assert fake.count(SEARCH) == 1
    assert fake.count(LABELLED) == 1
    assert len(fake.requests) == 2  # (nothing else: no listing, no page read)
    [(_, newest)] = [(p, args) for p, args in fake.requests if re.fullmatch(SEARCH, p)]
    assert newest["cql"] == 'space IN ("ENG") AND type = page order by lastmodified desc'
    [(_, labelled)] = [(p, args) for p, args in fake.requests if re.fullmatch(LABELLED, p)]
    assert labelled["cql"] == 'space IN ("ENG") AND type = page AND label = "superseded"'
    assert labelled["expand"].split(",") == [
        f"metadata.properties.{key}"
        for key in ("superseded_by", "effective_from", "effective_to", "doc_class")
    ]
    assert source.probe(token) == token
    fake.pages["103"].version, fake.pages["103"].when = 8, "2024-06-01T09:00:00.000Z"
    edited = source.probe(token)
    assert edited != token
    fake.add(FakePage("106", "New", "<p>new</p>", when="2024-07-01T09:00:00.000Z"))
    added = source.probe(edited)
    assert added != edited
    del fake.pages["102"]  # (not the newest: the count says it)
    gone = source.probe(added)
    assert gone != added
    fake.pages["103"].labels.append("superseded")  # (no new version, no new date)
    labelled = source.probe(gone)
    assert labelled != gone
    fake.pages["103"].labels.remove("superseded")
    assert source.probe(labelled) == gone


def test_the_probe_moves_with_a_labelled_pages_successor_property_alone(
    site: FakeConfluence,
) -> None:
    """The successor property set, changed or removed on a labelled page, with no edit and
    no label moved, moves the token; a property of an unlabelled page (where it declares
    nothing) does not."""
    fake = site
    source = make_source(fake)
    token = source.probe(None)
    pointing = [p for p in fake.pages.values() if "superseded" in p.labels]
    assert pointing  # (the corpus: Expenses 2024, superseded by 2025)
    page = pointing[0]
    page.properties["superseded_by"] = "103"  # (points elsewhere)
    moved = source.probe(token)
    assert moved != token
    del page.properties["superseded_by"]
    gone = source.probe(moved)
    assert gone not in (token, moved)
    page.properties["superseded_by"] = {"id": "103"}
    assert source.probe(gone) not in (token, moved, gone)
    again = source.probe(gone)
    other = next(p for p in fake.pages.values() if "superseded" not in p.labels)
    other.properties["superseded_by"] = "101"
    assert source.probe(again) == again


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("effective_to", "2026-06-30"),
        ("doc_class", "archive"),
        ("effective_from", "2024-02-01"),
        ("starts", "2024-03-01"),  # (effective_from_property = "starts")
    ],
)
def test_the_probe_moves_with_a_labelled_pages_date_or_class_alone(
    site: FakeConfluence, key: str, value: str
) -> None:
    """Each property a page declares by (its start, as configured, its end, its class) set,
    changed or removed alone on a labelled page moves the token, back where it was once
    undone; the same on a page without the label does not (the label search does not list
    it: the full job's). One request still, the expansion well within a URL's limits."""
    fake = site
    source = make_source(
        fake, effective_from_property="starts" if key == "starts" else "effective_from"
    )
    token = source.probe(None)
    page = fake.pages["101"]  # (labelled, superseded by 102)
    before = dict(page.properties)
    page.properties[key] = value
    asked = len(fake.requests)
    moved = source.probe(token)
    assert moved != token
    assert fake.count(LABELLED) == 2  # (one each probe)
    [(_, labelled)] = [(p, a) for p, a in fake.requests[asked:] if re.fullmatch(LABELLED, p)]
    assert len(urlencode(labelled)) < 1000
    page.properties[key] = value + "Z" if key == "doc_class" else "2031-01-01"
    changed = source.probe(moved)
    assert changed not in (token, moved)
    page.properties.clear()
    page.properties.update(before)
    assert source.probe(changed) == token
    unlabelled = fake.pages["103"]
    unlabelled.properties[key] = value
    assert source.probe(token) == token
    page.properties[key] = None  # (a null value reads as no property, as the scan reads it)
    if key not in before:
        assert source.probe(token) == token


def test_a_site_without_the_search_cannot_tell(site: FakeConfluence) -> None:
    site.fail(SEARCH, status(404))
    assert make_source(site).probe(None) is None


CONFLUENCE = """
[[sources]]
name = "wiki"
type = "confluence"
url = "{url}"
poll_interval = "1m"
[sources.options]
flavor = "datacenter"
token_env = "CONF_TOKEN"
spaces = ["ENG"]
page_size = 10
"""


def test_an_idle_poll_is_one_request_and_a_change_is_reconciled(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    site = FakeConfluence(httpserver, "datacenter")
    for number, title in ((201, "Runbook"), (202, "Guide")):
        site.add(FakePage(str(number), title, f"<h1>{title}</h1><p>Read it.</p>", version=2))
    dep = Deployment(tmp_path / "dep")
    dep.configure(source_extra=CONFLUENCE.format(url=site.url))
    dep.init_ingest()
    assert {"wiki:201", "wiki:202"} <= dep.served()
    watch, polled, clock = first_poll(dep)
    try:
        asked = len(site.requests)
        clock.advance(60)
        watch.tick()
        assert len(site.requests[asked:]) == 2  # the two searches, nothing else
        assert all(
            re.fullmatch(SEARCH, path) or re.fullmatch(LABELLED, path)
            for path, _ in site.requests[asked:]
        )
        site.pages["201"].status = "trashed"  # (retired: out of the search's scope too)
        site.pages["201"].version = 4
        clock.advance(60)
        watch.tick()
        assert "wiki:201" not in dep.served()
        assert "wiki:202" in dep.served()
        assert not polled.batch.paths
    finally:
        watch.stop()


def first_poll(dep: Deployment) -> tuple[Watch, PolledWatch, ManualClock]:
    """The watch of ``dep``'s Confluence source on a manual clock, opened, after its first
    poll (where the site stands)."""
    clock = ManualClock(datetime.now(UTC))
    watch = Watch(dep.settings, CollectorRegistry(), clock=clock)
    (polled,) = [w for w in watch.sources if isinstance(w, PolledWatch)]
    watch.open()
    watch.tick()
    return watch, polled, clock
