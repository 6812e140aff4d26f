"""The confluence connector against a real local HTTP server shaped like Confluence.

``FakeConfluence`` serves, from one dict of pages, the endpoints the connector uses:
Cloud REST v2 (``/wiki/api/v2/spaces``, ``/pages`` with cursor paging through the ``Link``
header and ``_links.next``, ``/pages/{id}``, ``/pages/{id}/labels``, ``/pages/{id}/properties``)
and Data Center REST v1 under a ``/confluence`` context path (``/rest/api/space/{key}``,
``/rest/api/content`` and ``/content/search`` with start/limit paging and ``expand``,
``/content/{id}``, ``/content/{id}/property``), and REST v1's CQL ``/search`` on both (the
watch's last-modified probe). It checks the credentials as the real thing
does (basic e-mail + API token on Cloud, bearer PAT on Data Center) and can be told to answer
a chosen request with a fault (a status, malformed JSON, a slow answer) a number of times.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

import pytest
from acceptance_kit import migrated_table
from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.confluence import ConfluenceSource
from connectors.httpclient import HttpPolicy
from connectors.testing import SystemOfRecordContract
from reconciler.app.wiring import build_sources
from reconciler.clock import ManualClock
from reconciler.embedding import HashingEmbedder
from reconciler.ingesting import Ingestor
from reconciler.model import ProblemKind, VersionState
from reconciler.pipeline.running import Reconciler
from reconciler.pipeline.values import Guard, Options
from reconciler.settings import load_settings
from reconciler.sources import build_source, connector_class
from reconciler.testing.memory import InMemoryChunkIndex

USER, TOKEN = "bot@example.com", "s3cr3t-token-7Qx9"
CLOUD_SPACES = {"ENG": "98301", "OPS": "98302"}
FAST = HttpPolicy(
    connect_timeout=2, read_timeout=5, retries=3, backoff_factor=0.01, backoff_jitter=0
)


@dataclass
class FakePage:
    id: str
    title: str
    body: str
    space: str = "ENG"
    status: str = "current"
    version: int = 1
    when: str = "2024-03-01T09:00:00.000Z"
    labels: list[str] = field(default_factory=list)
    properties: dict[str, Any] = field(default_factory=dict)


@dataclass
class Fault:
    """Answer requests matching ``path`` (a regex) and ``args`` with ``responses``, in order."""

    path: str
    responses: list[Callable[[], Response]]
    args: dict[str, str] = field(default_factory=dict)

    def matches(self, request: Request) -> bool:
        return bool(re.fullmatch(self.path, request.path)) and all(
            request.args.get(k) == v for k, v in self.args.items()
        )


def status(code: int, headers: dict[str, str] | None = None) -> Callable[[], Response]:
    return lambda: Response(json.dumps({"statusCode": code}), code, headers or {})


def malformed() -> Response:
    return Response('{"results": [ {"id": "1', 200, content_type="application/json")


class Slow:
    """A response that comes after ``seconds``; ``done`` is set once the server is free again
    (pytest-httpserver serves one request at a time)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.done = threading.Event()

    def __call__(self) -> Response:
        time.sleep(self.seconds)
        self.done.set()
        return Response("{}", 200, content_type="application/json")


class FakeConfluence:
    """Confluence Cloud (v2) or Data Center (v1), served from ``pages``."""

    def __init__(self, server: HTTPServer, flavor: str) -> None:
        self.server = server
        self.flavor = flavor
        self.pages: dict[str, FakePage] = {}
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, dict[str, str]]] = []
        self.authorizations: set[str | None] = set()
        self.next_via = "both"  # Cloud: "header", "body" or "both"
        self.forbidden = False
        server.expect_request(re.compile("/.*")).respond_with_handler(self.handle)

    @property
    def url(self) -> str:
        root = self.server.url_for("/").rstrip("/")
        return root if self.flavor == "cloud" else f"{root}/confluence"

    def add(self, *pages: FakePage) -> None:
        for page in pages:
            self.pages[page.id] = page

    def fail(self, path: str, *responses: Callable[[], Response], **args: str) -> None:
        self.faults.append(Fault(path, list(responses), args))

    def count(self, path: str) -> int:
        return sum(1 for p, _ in self.requests if re.fullmatch(path, p))

    # -- dispatch ------------------------------------------------------------------------

    def handle(self, request: Request) -> Response:
        self.requests.append((request.path, dict(request.args)))
        self.authorizations.add(request.headers.get("Authorization"))
        for fault in self.faults:
            if fault.responses and fault.matches(request):
                return fault.responses.pop(0)()
        expected = (
            "Basic " + base64.b64encode(f"{USER}:{TOKEN}".encode()).decode()
            if self.flavor == "cloud"
            else f"Bearer {TOKEN}"
        )
        if request.headers.get("Authorization") != expected:
            return Response('{"message": "Unauthorized"}', 401, content_type="application/json")
        if self.forbidden:
            return Response('{"message": "Forbidden"}', 403, content_type="application/json")
        handler = self.cloud if self.flavor == "cloud" else self.datacenter
        if request.path in ("/wiki/rest/api/search", "/confluence/rest/api/search"):
            handler = self.search
        if request.path == "/wiki/rest/api/content/search":  # (REST v1's, on Cloud too)
            handler = self.datacenter
        answer = handler(request)
        if answer is None:
            return Response('{"statusCode": 404, "message": "not found"}', 404)
        body, headers = answer
        return Response(json.dumps(body), 200, headers, content_type="application/json")

    # -- Cloud REST v2 -------------------------------------------------------------------

    def cloud(self, request: Request) -> tuple[dict[str, Any], dict[str, str]] | None:
        path, args = request.path, request.args
        if path == "/wiki/api/v2/spaces":
            keys = args.get("keys", "").split(",")
            spaces = [
                {"id": CLOUD_SPACES[k], "key": k, "name": k.title(), "type": "global"}
                for k in keys
                if k in CLOUD_SPACES
            ]
            return self.cursor(request, spaces)
        if path == "/wiki/api/v2/pages":
            space_key = {v: k for k, v in CLOUD_SPACES.items()}.get(args.get("space-id", ""))
            wanted = args.get("status", "current,archived").split(",")
            ids = args["id"].split(",") if "id" in args else None
            listed = [
                self.cloud_page(p, body=args.get("body-format") == "storage")
                for p in self.ordered()
                if (p.space == space_key or ("space-id" not in args and ids is not None))
                and p.status in wanted
                and (ids is None or p.id in ids)
                and args.get("title", p.title) == p.title
            ]
            return self.cursor(request, listed)
        match = re.fullmatch(r"/wiki/api/v2/pages/([0-9]+)(/labels|/properties)?", path)
        if match is None or match.group(1) not in self.pages:
            return None
        page = self.pages[match.group(1)]
        if match.group(2) == "/labels":
            labels = [
                {"id": str(9000 + i), "name": n, "prefix": "global"}
                for i, n in enumerate(page.labels)
            ]
            return self.cursor(request, labels)
        if match.group(2) == "/properties":
            props = [
                {
                    "id": str(7000 + i),
                    "key": k,
                    "value": v,
                    "version": {"number": 1, "createdAt": page.when},
                }
                for i, (k, v) in enumerate(sorted(page.properties.items()))
            ]
            return self.cursor(request, props)
        return self.cloud_page(page, body=args.get("body-format") == "storage"), {}

    def cloud_page(self, page: FakePage, *, body: bool) -> dict[str, Any]:
        shaped: dict[str, Any] = {
            "id": page.id,
            "status": page.status,
            "title": page.title,
            "spaceId": CLOUD_SPACES[page.space],
            "parentId": "100",
            "parentType": "page",
            "position": 1,
            "authorId": "5b10ac8d82e05b22cc7d4ef5",
            "ownerId": "5b10ac8d82e05b22cc7d4ef5",
            "createdAt": "2023-01-01T00:00:00.000Z",
            "version": {
                "number": page.version,
                "message": "",
                "minorEdit": False,
                "authorId": "5b10ac8d82e05b22cc7d4ef5",
                "createdAt": page.when,
            },
            "_links": {"webui": f"/spaces/{page.space}/pages/{page.id}", "tinyui": "/x/AbC"},
        }
        if body:
            shaped["body"] = {"storage": {"value": page.body, "representation": "storage"}}
        return shaped

    def cursor(self, request: Request, items: list[Any]) -> tuple[dict[str, Any], dict[str, str]]:
        limit = int(request.args.get("limit", 25))
        offset = int(request.args.get("cursor", "c0")[1:])
        chunk = items[offset : offset + limit]
        body: dict[str, Any] = {"results": chunk, "_links": {"base": f"{self.url}/wiki"}}
        headers: dict[str, str] = {}
        if offset + limit < len(items):
            args = {k: v for k, v in request.args.items() if k != "cursor"}
            link = f"{request.path}?{urlencode({**args, 'cursor': f'c{offset + limit}'})}"
            if self.next_via in ("body", "both"):
                body["_links"]["next"] = link
            if self.next_via in ("header", "both"):
                headers["Link"] = f'<{link}>; rel="next", <{self.url}/wiki>; rel="base"'
        return body, headers

    # -- REST v1's CQL search (both flavors): the watch's last-modified probe -------------

    def search(self, request: Request) -> tuple[dict[str, Any], dict[str, str]] | None:
        cql = request.args["cql"]
        spaces = re.search(r"space IN \(([^)]*)\)", cql)
        keys = re.findall(r'"([^"]+)"', spaces.group(1)) if spaces else None
        found = [p for p in self.ordered() if p.status == "current"]
        found = [p for p in found if (keys is None or p.space in keys) and self.cql_keeps(cql, p)]
        if "order by lastmodified desc" in cql:
            found.sort(key=lambda p: p.when, reverse=True)
        start, limit = int(request.args.get("start", 0)), int(request.args.get("limit", 25))
        found_all, found = found, found[start:]
        entries = [
            {
                "content": {"id": p.id, "type": "page", "status": p.status, "title": p.title,
                            "version": {"number": p.version, "when": p.when}},
                "title": p.title,
                "lastModified": p.when,
            }
            for p in found[:limit]
        ]  # fmt: skip
        links = {"base": self.url, "context": "/confluence" if self.flavor != "cloud" else "/wiki"}
        if start + limit < len(found_all):
            links["next"] = (
                f"/rest/api/search?{urlencode({**request.args, 'start': start + limit})}"
            )
        return {
            "results": entries, "start": start, "limit": limit, "size": len(entries),
            "totalSize": len(found_all), "cqlQuery": cql, "_links": links,
        }, {}  # fmt: skip

    @staticmethod
    def cql_keeps(cql: str, page: FakePage) -> bool:
        """Whether the clauses this fake understands keep ``page``: ``lastmodified >=
        now("-Nm")`` (relative to the server's clock, as Confluence reads it), ``label =
        "…"``, ``id IN (…)`` and ``title = "…"`` alternatives (a CQL string's escapes
        undone)."""
        since = re.search(r'lastmodified >= now\("-([0-9]+)m"\)', cql)
        if since is not None:
            edge = datetime.now(UTC) - timedelta(minutes=int(since.group(1)))
            if datetime.fromisoformat(page.when.replace("Z", "+00:00")) < edge:
                return False
        label = re.search(r'label = "((?:[^"\\]|\\.)*)"', cql)
        if label is not None and label.group(1) not in page.labels:
            return False
        ids = re.search(r"id IN \(([0-9, ]*)\)", cql)
        if ids is not None and page.id not in re.findall(r"[0-9]+", ids.group(1)):
            return False
        titles = re.findall(r'title = "((?:[^"\\]|\\.)*)"', cql)
        unescaped = {re.sub(r"\\(.)", r"\1", title) for title in titles}
        return not titles or page.title in unescaped

    # -- Data Center REST v1 -------------------------------------------------------------

    def datacenter(self, request: Request) -> tuple[dict[str, Any], dict[str, str]] | None:
        path, args = re.sub(r"^/(confluence|wiki)", "", request.path), request.args
        expand = args.get("expand", "").split(",")
        match = re.fullmatch(r"/rest/api/space/([A-Z]+)", path)
        if match is not None:
            if match.group(1) not in CLOUD_SPACES:
                return None
            return {"id": 1, "key": match.group(1), "name": match.group(1).title()}, {}
        if path == "/rest/api/content":
            listed = [
                self.dc_page(p, expand)
                for p in self.ordered()
                if p.space == args.get("spaceKey") and p.status == args.get("status", "current")
            ]
            return self.offset(request, listed), {}
        if path == "/rest/api/content/search":
            cql = args["cql"]
            label = re.search(r'label = "([^"]+)"', cql)
            spaces = re.search(r"space IN \(([^)]*)\)", cql)
            keys = re.findall(r'"([^"]+)"', spaces.group(1)) if spaces else None
            listed = [
                self.dc_page(p, expand)
                for p in self.ordered()
                if p.status == "current"
                and (label is None or label.group(1) in p.labels)
                and (keys is None or p.space in keys)
                and self.cql_keeps(cql, p)
            ]
            return self.offset(request, listed), {}
        match = re.fullmatch(r"/rest/api/content/([0-9]+)(/property)?", path)
        if match is None or match.group(1) not in self.pages:
            return None
        page = self.pages[match.group(1)]
        if match.group(2):
            props = [
                {"id": str(7000 + i), "key": k, "value": v, "version": {"number": 1}}
                for i, (k, v) in enumerate(sorted(page.properties.items()))
            ]
            return self.offset(request, props), {}
        if page.status != args.get("status", "current"):
            return None  # as on Data Center: a trashed page is found with status=trashed only
        return self.dc_page(page, expand), {}

    def dc_page(self, page: FakePage, expand: list[str]) -> dict[str, Any]:
        shaped: dict[str, Any] = {
            "id": page.id,
            "type": "page",
            "status": page.status,
            "title": page.title,
            "extensions": {"position": "none"},
            "_links": {
                "webui": f"/display/{page.space}/{page.title.replace(' ', '+')}",
                "self": f"{self.url}/rest/api/content/{page.id}",
            },
            "_expandable": {"children": f"/rest/api/content/{page.id}/child"},
        }
        if "space" in expand:
            shaped["space"] = {
                "id": 98305,
                "key": page.space,
                "name": page.space.title(),
                "type": "global",
            }
        if "version" in expand:
            shaped["version"] = {
                "by": {"type": "known", "username": "admin", "displayName": "Admin"},
                "when": page.when.replace("Z", "+00:00"),
                "message": "",
                "number": page.version,
                "minorEdit": False,
            }
        if "history" in expand:
            shaped["history"] = {"latest": True, "createdDate": "2023-01-01T00:00:00.000+00:00"}
        if "ancestors" in expand:
            shaped["ancestors"] = [
                {"id": "100", "type": "page", "status": "current", "title": "Home"}
            ]
        wanted = {e.split(".", 2)[2] for e in expand if e.startswith("metadata.properties.")}
        properties = {
            key: {"id": "7001", "key": key, "value": value, "version": {"number": 1}}
            for key, value in page.properties.items()
            if key in wanted
        }
        if properties:  # (``expand=metadata.properties.KEY``: the property, where set)
            shaped["metadata"] = {"properties": properties}
        if "metadata.labels" in expand:
            shaped.setdefault("metadata", {})["labels"] = {
                "results": [
                    {"prefix": "global", "name": n, "id": str(9000 + i)}
                    for i, n in enumerate(page.labels)
                ],
                "start": 0,
                "limit": 200,
                "size": len(page.labels),
            }
        if "body.storage" in expand:
            shaped["body"] = {"storage": {"value": page.body, "representation": "storage"}}
        return shaped

    def offset(self, request: Request, items: list[Any]) -> dict[str, Any]:
        start, limit = int(request.args.get("start", 0)), int(request.args.get("limit", 25))
        chunk = items[start : start + limit]
        links: dict[str, str] = {"base": self.url, "context": "/confluence"}
        if start + limit < len(items):
            args = {**request.args, "start": str(start + limit)}
            links["next"] = f"{request.path.removeprefix('/confluence')}?{urlencode(args)}"
        return {
            "results": chunk,
            "start": start,
            "limit": limit,
            "size": len(chunk),
            "_links": links,
        }

    def ordered(self) -> list[FakePage]:
        return sorted(self.pages.values(), key=lambda p: int(p.id))


# -- fixtures ------------------------------------------------------------------------------


def corpus() -> list[FakePage]:
    """Expenses 2024 (superseded by 2025 via label + property), a runbook, an archived page,
    a trashed one."""
    return [
        FakePage(
            "101",
            "Expenses 2024",
            "<p>Meals up to 40 EUR.</p>",
            version=4,
            labels=["superseded", "policy"],
            properties={"superseded_by": "102", "effective_from": "2024-01-01"},
        ),
        FakePage(
            "102",
            "Expenses 2025",
            "<p>Meals up to 55 EUR.</p>",
            version=2,
            labels=["policy"],
            properties={"effective_from": "2025-01-01", "doc_class": "policy"},
        ),
        FakePage("103", "Runbook", "<h1>Deploy</h1><p>Announce it.</p>", version=7),
        FakePage("104", "Old VPN", "<p>Use the old VPN.</p>", status="archived"),
        FakePage("105", "Scratch", "<p>scratch</p>", status="trashed", labels=["superseded"]),
    ]


def make_source(
    fake: FakeConfluence, *, policy: HttpPolicy = FAST, name: str = "wiki", **kwargs: Any
) -> ConfluenceSource:
    statuses = kwargs.pop("statuses", ("current", "archived", "trashed"))
    return ConfluenceSource(
        name,
        fake.url,
        flavor=fake.flavor,
        token_env="CONF_TOKEN",
        username_env="CONF_USER" if fake.flavor == "cloud" else None,
        spaces=kwargs.pop("spaces", ["ENG"]),
        statuses=statuses,
        page_size=kwargs.pop("page_size", 2),
        policy=policy,
        **kwargs,
    )


@pytest.fixture(autouse=True)
def credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONF_TOKEN", TOKEN)
    monkeypatch.setenv("CONF_USER", USER)


@pytest.fixture(params=["cloud", "datacenter"])
def fake(request: pytest.FixtureRequest, httpserver: HTTPServer) -> FakeConfluence:
    server = FakeConfluence(httpserver, request.param)
    server.add(*corpus())
    return server


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


# -- the contract, once per flavor --------------------------------------------------------


class _Contract(SystemOfRecordContract):
    flavor = "cloud"

    @pytest.fixture
    def source(self, httpserver: HTTPServer) -> ConfluenceSource:
        server = FakeConfluence(httpserver, self.flavor)
        server.add(*corpus())
        return make_source(server)

    @pytest.fixture
    def unavailable_source(self) -> ConfluenceSource:
        return ConfluenceSource(
            "wiki",
            closed_port_url(),
            flavor=self.flavor,
            token_env="CONF_TOKEN",
            username_env="CONF_USER",
            spaces=["ENG"],
            policy=HttpPolicy(connect_timeout=1, read_timeout=1, retries=0),
        )


class TestCloudContract(_Contract):
    flavor = "cloud"


class TestDataCenterContract(_Contract):
    flavor = "datacenter"


# -- what a healthy scan declares ---------------------------------------------------------


def test_pages_map_to_documents(fake: FakeConfluence) -> None:
    snapshot = make_source(fake).scan()
    assert snapshot.complete
    docs = {d.source_key: d for d in snapshot.documents}
    assert list(docs) == ["101", "102", "103", "104", "105"]
    old, new, runbook, archived, trashed = (docs[k] for k in ("101", "102", "103", "104", "105"))
    assert old.doc_id == "wiki:101"
    assert old.state is VersionState.SUPERSEDED
    assert old.superseded_by == "wiki:102"
    assert old.version == 4
    assert old.effective_from == datetime(2024, 1, 1, tzinfo=UTC)  # from the property
    assert new.state is VersionState.CURRENT
    assert new.superseded_by is None
    assert new.doc_class == "policy"
    assert new.title == "Expenses 2025"
    assert runbook.effective_from == datetime(2024, 3, 1, 9, tzinfo=UTC)  # the version's date
    assert runbook.version == 7
    assert archived.state is VersionState.RETIRED
    assert trashed.state is VersionState.RETIRED
    assert trashed.superseded_by is None
    assert runbook.path is not None
    assert runbook.path.startswith("ENG/")
    assert snapshot.problems == ()


def test_status_mapping_including_draft(fake: FakeConfluence) -> None:
    fake.add(FakePage("106", "Draft", "<p>d</p>", status="draft"))
    snapshot = make_source(fake, statuses=("current", "archived", "trashed", "draft")).scan()
    states = {d.source_key: d.state for d in snapshot.documents}
    assert states["106"] is VersionState.DRAFT
    assert states["104"] is VersionState.RETIRED
    assert states["105"] is VersionState.RETIRED


def test_unknown_status_is_a_problem_and_state_unknown(httpserver: HTTPServer) -> None:
    fake = FakeConfluence(httpserver, "cloud")
    fake.add(FakePage("201", "Odd", "<p>o</p>"))
    original = fake.cloud_page
    fake.cloud_page = lambda page, body: {**original(page, body=body), "status": "historical"}  # type: ignore[method-assign]
    snapshot = make_source(fake, statuses=("current",)).scan()
    (doc,) = snapshot.documents
    assert doc.state is None
    (problem,) = snapshot.problems
    assert problem.kind is ProblemKind.INVALID_FIELD
    assert "historical" in problem.message
    assert problem.doc_id == "wiki:201"


def test_supersession_needs_label_and_property(fake: FakeConfluence) -> None:
    fake.pages["103"].properties["superseded_by"] = "102"  # property alone: ignored
    fake.add(FakePage("106", "Labelled only", "<p>x</p>", labels=["superseded"]))
    fake.add(
        FakePage(
            "107",
            "Pasted a URL",
            "<p>y</p>",
            labels=["Superseded"],
            properties={"superseded_by": f"{fake.url}/wiki/spaces/ENG/pages/103/Runbook"},
        )
    )
    fake.add(
        FakePage(
            "108",
            "Points outside",
            "<p>z</p>",
            labels=["superseded"],
            properties={"superseded_by": {"id": 999}},
        )
    )
    fake.add(
        FakePage(
            "109", "Self", "<p>s</p>", labels=["superseded"], properties={"superseded_by": "109"}
        )
    )
    snapshot = make_source(fake).scan()
    docs = {d.source_key: d for d in snapshot.documents}
    assert docs["103"].state is VersionState.CURRENT
    assert docs["103"].superseded_by is None
    assert docs["106"].state is VersionState.CURRENT
    assert docs["107"].state is VersionState.SUPERSEDED
    assert docs["107"].superseded_by == "wiki:103"
    assert docs["108"].state is VersionState.CURRENT
    assert docs["108"].superseded_by is None
    assert docs["109"].state is VersionState.CURRENT
    kinds = {(p.source_key, p.kind) for p in snapshot.problems}
    assert kinds == {
        ("106", ProblemKind.INVALID_FIELD),
        ("108", ProblemKind.DANGLING_SUPERSEDED_BY),
        ("109", ProblemKind.SELF_SUPERSESSION),
    }


def test_supersession_cycle_is_dropped(fake: FakeConfluence) -> None:
    fake.pages["102"].labels.append("superseded")
    fake.pages["102"].properties["superseded_by"] = "101"
    snapshot = make_source(fake).scan()
    docs = {d.source_key: d for d in snapshot.documents}
    assert docs["101"].superseded_by is None
    assert docs["102"].superseded_by is None
    cycles = [p for p in snapshot.problems if p.kind is ProblemKind.SUPERSESSION_CYCLE]
    assert sorted(p.source_key for p in cycles) == ["101", "102"]


def test_configured_label_and_property(fake: FakeConfluence) -> None:
    fake.pages["103"].labels.append("replaced")
    fake.pages["103"].properties["replaced_by"] = 102
    snapshot = make_source(
        fake, supersession_label="replaced", successor_property="replaced_by"
    ).scan()
    docs = {d.source_key: d for d in snapshot.documents}
    assert docs["103"].superseded_by == "wiki:102"
    assert docs["101"].state is VersionState.CURRENT  # "superseded" is not the label now


def test_invalid_effective_from_property_is_a_field_problem(fake: FakeConfluence) -> None:
    fake.pages["103"].properties["effective_from"] = "next tuesday"
    snapshot = make_source(fake).scan()
    docs = {d.source_key: d for d in snapshot.documents}
    assert docs["103"].effective_from == datetime(2024, 3, 1, 9, tzinfo=UTC)
    (problem,) = snapshot.problems
    assert problem.kind is ProblemKind.INVALID_FIELD
    assert "effective_from" in problem.message


def test_page_id_is_the_identity_across_moves(fake: FakeConfluence) -> None:
    source = make_source(fake, spaces=["ENG", "OPS"])
    before = {d.source_key: d for d in source.scan().documents}
    fake.pages["103"].space = "OPS"
    fake.pages["103"].title = "Runbook (moved)"
    after = {d.source_key: d for d in source.scan().documents}
    assert after["103"].doc_id == before["103"].doc_id == "wiki:103"
    assert after["103"].content_hash == before["103"].content_hash
    assert after["103"].path != before["103"].path


# -- paging --------------------------------------------------------------------------------


@pytest.mark.parametrize("via", ["header", "body"])
def test_cloud_cursor_paging_follows_link_header_or_links_next(
    httpserver: HTTPServer, via: str
) -> None:
    fake = FakeConfluence(httpserver, "cloud")
    fake.next_via = via
    fake.add(*(FakePage(str(300 + i), f"Page {i}", f"<p>{i}</p>") for i in range(7)))
    snapshot = make_source(fake, page_size=3, statuses=("current",)).scan()
    assert [d.source_key for d in snapshot.documents] == [str(300 + i) for i in range(7)]
    assert snapshot.complete
    listing = [a for p, a in fake.requests if p == "/wiki/api/v2/pages"]
    assert [a.get("cursor") for a in listing] == [None, "c3", "c6"]


def test_datacenter_start_limit_paging(httpserver: HTTPServer) -> None:
    fake = FakeConfluence(httpserver, "datacenter")
    fake.add(*(FakePage(str(300 + i), f"Page {i}", f"<p>{i}</p>") for i in range(7)))
    snapshot = make_source(fake, page_size=3, statuses=("current",)).scan()
    assert [d.source_key for d in snapshot.documents] == [str(300 + i) for i in range(7)]
    listing = [a for p, a in fake.requests if p == "/confluence/rest/api/content"]
    assert [a["start"] for a in listing] == ["0", "3", "6"]
    assert all(a["limit"] == "3" and "metadata.labels" in a["expand"] for a in listing)


def test_datacenter_an_empty_page_with_a_next_link_is_not_the_end(httpserver: HTTPServer) -> None:
    """Data Center filters a listing page by permission after taking it from the database, so
    a page may come back with no results (size 0) while ``_links.next`` says more follow. The
    listing goes on at the link's ``start``, as after a page the filter only thinned (it was
    read as the end: a complete scan without the pages after it, each then missing_in_source
    and retired after the grace)."""
    fake = FakeConfluence(httpserver, "datacenter")
    fake.add(*(FakePage(str(300 + i), f"Page {i}", f"<p>{i}</p>") for i in range(7)))
    filtered = {
        "results": [],
        "start": 2,
        "limit": 2,
        "size": 0,
        "_links": {"next": "/rest/api/content?start=4&limit=2", "context": "/confluence"},
    }
    fake.fail(
        "/confluence/rest/api/content",
        lambda: Response(json.dumps(filtered), 200, content_type="application/json"),
        start="2",
    )
    snapshot = make_source(fake, page_size=2, statuses=("current",)).scan()
    listing = [a["start"] for p, a in fake.requests if p == "/confluence/rest/api/content"]
    assert listing == ["0", "2", "4", "6"]
    assert [d.source_key for d in snapshot.documents] == ["300", "301", "304", "305", "306"]
    assert snapshot.complete  # the pages the token may not see are not in the source


def test_datacenter_an_empty_page_whose_next_link_goes_nowhere_is_a_partial_listing(
    httpserver: HTTPServer,
) -> None:
    fake = FakeConfluence(httpserver, "datacenter")
    fake.add(*(FakePage(str(300 + i), f"Page {i}", f"<p>{i}</p>") for i in range(7)))
    stuck = {"results": [], "start": 2, "limit": 2, "size": 0, "_links": {"next": "/x?start=2"}}
    fake.fail(
        "/confluence/rest/api/content",
        *(lambda: Response(json.dumps(stuck), 200, content_type="application/json"),) * 3,
        start="2",
    )
    snapshot = make_source(fake, page_size=2, statuses=("current",)).scan()
    assert [d.source_key for d in snapshot.documents] == ["300", "301"]
    assert not snapshot.complete
    [loose] = [p for p in snapshot.problems if p.doc_id is None]
    assert "no results" in loose.message


def test_datacenter_cql_scope(httpserver: HTTPServer) -> None:
    fake = FakeConfluence(httpserver, "datacenter")
    fake.add(*corpus())
    source = make_source(fake, spaces=["ENG"], cql='label = "policy"', page_size=1)
    snapshot = source.scan()
    assert [d.source_key for d in snapshot.documents] == ["101", "102"]
    (cql,) = {a["cql"] for p, a in fake.requests if p.endswith("/content/search")}
    assert cql == 'space IN ("ENG") AND type = page AND (label = "policy")'


# -- HTTP hygiene: retries, timeouts, auth, failures --------------------------------------


def list_path(fake: FakeConfluence) -> str:
    return "/wiki/api/v2/pages" if fake.flavor == "cloud" else "/confluence/rest/api/content"


def second_page_args(fake: FakeConfluence) -> dict[str, str]:
    return {"cursor": "c2"} if fake.flavor == "cloud" else {"start": "2"}


def test_429_with_retry_after_then_success(fake: FakeConfluence) -> None:
    fake.fail(list_path(fake), status(429, {"Retry-After": "1"}), **second_page_args(fake))
    clock = ManualClock()
    started = clock.monotonic()
    snapshot = make_source(fake, policy=dataclasses.replace(FAST, clock=clock)).scan()
    assert clock.monotonic() - started >= 1.0  # Retry-After was honoured
    assert clock.sleeps == [1.0]  # on the clock, not in real time
    assert snapshot.complete
    assert len(snapshot.documents) == 5


def test_a_burst_of_503s_then_success(fake: FakeConfluence) -> None:
    fake.fail(list_path(fake), status(503), status(503), status(503))
    snapshot = make_source(fake).scan()
    assert snapshot.complete
    assert len(snapshot.documents) == 5
    assert fake.count(list_path(fake)) >= 4


def test_503s_outlasting_the_retries_on_the_first_page_raise_unavailable(
    fake: FakeConfluence,
) -> None:
    fake.fail(list_path(fake), *(status(503) for _ in range(10)))
    with pytest.raises(SourceUnavailable, match="503"):
        make_source(fake).scan()


def test_failure_mid_listing_returns_a_partial_snapshot(fake: FakeConfluence) -> None:
    fake.fail(list_path(fake), *(status(500) for _ in range(10)), **second_page_args(fake))
    snapshot = make_source(fake).scan()
    assert not snapshot.complete
    assert [d.source_key for d in snapshot.documents] == ["101", "102"]
    loose = [p for p in snapshot.problems if p.doc_id is None]
    assert len(loose) == 1
    assert loose[0].kind is ProblemKind.UNREADABLE
    assert "partial scan" in loose[0].message
    assert "500" in loose[0].message


def test_partial_scan_holds_back_a_page_whose_successor_was_not_read(
    fake: FakeConfluence,
) -> None:
    fake.pages["101"].properties["superseded_by"] = "103"  # on the page that fails
    fake.fail(list_path(fake), *(status(500) for _ in range(10)), **second_page_args(fake))
    snapshot = make_source(fake).scan()
    assert not snapshot.complete
    assert [d.source_key for d in snapshot.documents] == ["102"]
    held = [p for p in snapshot.problems if p.source_key == "101"]
    assert [p.kind for p in held] == [ProblemKind.UNREADABLE]
    assert not any(p.kind is ProblemKind.DANGLING_SUPERSEDED_BY for p in snapshot.problems)


@pytest.fixture(params=["cloud", "datacenter"])
def threaded(request: pytest.FixtureRequest) -> Iterator[FakeConfluence]:
    """A fake on its own threaded server: a slow answer does not hold up the next request."""
    server = HTTPServer(threaded=True)
    server.start()
    try:
        fake = FakeConfluence(server, request.param)
        fake.add(*corpus())
        yield fake
    finally:
        server.clear()
        server.stop()


def test_read_timeout_on_the_first_request_raises_unavailable(threaded: FakeConfluence) -> None:
    fake = threaded
    first = "/wiki/api/v2/spaces" if fake.flavor == "cloud" else "/confluence/rest/api/space/ENG"
    slow = Slow(1.0)
    fake.fail(first, slow)
    policy = HttpPolicy(connect_timeout=1, read_timeout=0.25, retries=0)
    with pytest.raises(SourceUnavailable, match=r"ENG|spaces"):
        make_source(fake, policy=policy).scan()
    assert slow.done.wait(5)


def test_read_timeout_mid_listing_returns_a_partial_snapshot(threaded: FakeConfluence) -> None:
    fake = threaded
    slow = Slow(1.0)
    fake.fail(list_path(fake), slow, **second_page_args(fake))
    policy = HttpPolicy(connect_timeout=1, read_timeout=0.25, retries=0)
    snapshot = make_source(fake, policy=policy).scan()
    assert slow.done.wait(5)
    assert not snapshot.complete
    assert [d.source_key for d in snapshot.documents] == ["101", "102"]


@pytest.mark.parametrize("code", [401, 403])
def test_401_and_403_are_configuration_errors_naming_the_variable(
    fake: FakeConfluence, code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    if code == 401:
        monkeypatch.setenv("CONF_TOKEN", "wrong-" + TOKEN)
    else:
        fake.forbidden = True
    with pytest.raises(ConnectorConfigError) as caught:
        make_source(fake).scan()
    message = str(caught.value)
    assert str(code) in message
    assert "CONF_TOKEN" in message
    assert TOKEN not in message
    assert "wrong-" not in message


def test_missing_token_variable_is_a_configuration_error(
    fake: FakeConfluence, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CONF_TOKEN")
    with pytest.raises(ConnectorConfigError, match="CONF_TOKEN is not set"):
        make_source(fake).scan()
    assert fake.requests == []


def test_unknown_space_is_a_configuration_error(fake: FakeConfluence) -> None:
    with pytest.raises(ConnectorConfigError, match="NOPE"):
        make_source(fake, spaces=["ENG", "NOPE"]).scan()


def test_page_deleted_between_list_and_fetch_is_that_pages_problem(
    fake: FakeConfluence,
) -> None:
    what = "properties" if fake.flavor == "cloud" else "property"
    prefix = "/wiki/api/v2/pages" if fake.flavor == "cloud" else "/confluence/rest/api/content"
    fake.fail(f"{prefix}/103/{what}", status(404))
    snapshot = make_source(fake).scan()
    assert snapshot.complete
    assert [d.source_key for d in snapshot.documents] == ["101", "102", "104", "105"]
    (problem,) = snapshot.problems
    assert problem.kind is ProblemKind.UNREADABLE
    assert problem.doc_id == "wiki:103"
    assert problem.source_key == "103"
    assert "404" in problem.message


def test_malformed_json_on_the_first_page_raises_unavailable(fake: FakeConfluence) -> None:
    fake.fail(list_path(fake), malformed)
    with pytest.raises(SourceUnavailable, match="malformed JSON"):
        make_source(fake).scan()


def test_malformed_json_mid_listing_is_partial(fake: FakeConfluence) -> None:
    fake.fail(list_path(fake), malformed, **second_page_args(fake))
    snapshot = make_source(fake).scan()
    assert not snapshot.complete
    assert len(snapshot.documents) == 2


def test_malformed_json_for_one_page_is_that_pages_problem(fake: FakeConfluence) -> None:
    what = "properties" if fake.flavor == "cloud" else "property"
    prefix = "/wiki/api/v2/pages" if fake.flavor == "cloud" else "/confluence/rest/api/content"
    fake.fail(f"{prefix}/103/{what}", malformed)
    snapshot = make_source(fake).scan()
    assert snapshot.complete
    assert [d.source_key for d in snapshot.documents] == ["101", "102", "104", "105"]
    assert [(p.source_key, p.kind) for p in snapshot.problems] == [("103", ProblemKind.UNREADABLE)]
    assert "malformed JSON" in snapshot.problems[0].message


def test_a_page_whose_successor_is_unreadable_is_held_back_not_made_current(
    fake: FakeConfluence,
) -> None:
    """Dropping 101's pointer to an unreadable 102 would declare 101 current again."""
    what = "properties" if fake.flavor == "cloud" else "property"
    prefix = "/wiki/api/v2/pages" if fake.flavor == "cloud" else "/confluence/rest/api/content"
    fake.add(
        FakePage(
            "100",
            "Expenses 2023",
            "<p>30 EUR</p>",
            labels=["superseded"],
            properties={"superseded_by": "101"},
        )
    )
    fake.fail(f"{prefix}/102/{what}", status(404))
    snapshot = make_source(fake).scan()
    assert snapshot.complete
    assert [d.source_key for d in snapshot.documents] == ["103", "104", "105"]
    problems = {p.source_key: p for p in snapshot.problems}
    assert set(problems) == {"100", "101", "102"}
    assert all(p.kind is ProblemKind.UNREADABLE for p in problems.values())
    assert "page 102, was not read" in problems["101"].message
    assert "page 101, was not read" in problems["100"].message


def test_read_body_returns_the_storage_body(fake: FakeConfluence) -> None:
    source = make_source(fake)
    source.scan()
    assert source.read_body("103") == "<h1>Deploy</h1><p>Announce it.</p>"
    assert source.read_body("105") == "<p>scratch</p>"  # trashed: found with its status
    del fake.pages["103"]
    with pytest.raises(DocumentUnreadable, match="404"):
        source.read_body("103")
    with pytest.raises(DocumentUnreadable):
        source.read_body("../../admin")


def test_read_body_of_an_unreachable_server_is_unreadable_not_fatal() -> None:
    source = ConfluenceSource(
        "wiki",
        closed_port_url(),
        flavor="datacenter",
        token_env="CONF_TOKEN",
        spaces=["ENG"],
        policy=HttpPolicy(connect_timeout=1, retries=0),
    )
    with pytest.raises(DocumentUnreadable):
        source.read_body("101")


def test_the_secret_never_appears_in_logs_repr_or_errors(
    fake: FakeConfluence, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    source = make_source(fake)
    fake.fail(list_path(fake), *(status(502) for _ in range(10)), **second_page_args(fake))
    snapshot = source.scan()
    seen = [repr(source), repr(source._session.auth), str(snapshot), caplog.text]
    fake.forbidden = True
    with pytest.raises(ConnectorConfigError) as caught:
        source.scan()
    seen += [str(caught.value), repr(caught.value)]
    basic = base64.b64encode(f"{USER}:{TOKEN}".encode()).decode()
    for text in seen:
        assert TOKEN not in text
        assert basic not in text
    # and it was sent: as basic auth on Cloud, as a bearer token on Data Center
    sent = {a for a in fake.authorizations if a}
    assert sent == ({f"Basic {basic}"} if fake.flavor == "cloud" else {f"Bearer {TOKEN}"})


# -- configuration -------------------------------------------------------------------------


def settings(**overrides: Any) -> SimpleNamespace:
    options = {
        "flavor": "cloud",
        "spaces": ["ENG"],
        "username_env": "CONF_USER",
        "token_env": "CONF_TOKEN",
    }
    options.update(overrides.pop("options", {}))
    values = {"name": "wiki", "type": "confluence", "path": None, "url": "https://x.atlassian.net"}
    values.update(overrides)
    return SimpleNamespace(**values, options=options)


def test_config_problems_accepts_both_flavors() -> None:
    assert ConfluenceSource.config_problems(settings()) == []
    dc = settings(
        url="https://wiki.example.org/confluence",
        options={"flavor": "datacenter", "cql": "label = policy", "spaces": ["ENG"]},
    )
    dc.options.pop("username_env")
    assert ConfluenceSource.config_problems(dc) == []


def test_config_problems_lists_every_problem_without_echoing_a_secret() -> None:
    bad = settings(
        path="somewhere",
        url="https://user:pw@x.atlassian.net?x=1",
        options={
            "flavor": "cloudy",
            "spaces": "ENG",
            "token_env": TOKEN + "!",
            "token": TOKEN,
            "page_size": 0,
            "retries": -1,
            "read_timeout": 0,
            "statuses": ["archived"],
            "watch_properties": "some",
            "colour": "blue",
        },
    )
    problems = dict(ConfluenceSource.config_problems(bad))
    assert set(problems) >= {
        "path",
        "url",
        "options.flavor",
        "options.spaces",
        "options.token_env",
        "options.token",
        "options.page_size",
        "options.retries",
        "options.read_timeout",
        "options.statuses",
        "options.watch_properties",
        "options.colour",
    }
    assert all(TOKEN not in message for message in problems.values())


def test_cql_is_refused_on_cloud_and_username_on_datacenter() -> None:
    cloud = dict(ConfluenceSource.config_problems(settings(options={"cql": "space = ENG"})))
    assert "options.cql" in cloud
    dc = dict(ConfluenceSource.config_problems(settings(options={"flavor": "datacenter"})))
    assert "options.username_env" in dc


def test_from_settings_builds_the_connector_with_its_http_policy() -> None:
    source = ConfluenceSource.from_settings(
        settings(
            options={"retries": 2, "backoff_factor": 0.01, "backoff_jitter": 0, "read_timeout": 3}
        )
    )
    assert source.policy == HttpPolicy(
        read_timeout=3, retries=2, backoff_factor=0.01, backoff_jitter=0
    )
    assert "CONF_TOKEN" in repr(source)
    with pytest.raises(ConnectorConfigError, match=r"options\.flavor"):
        ConfluenceSource.from_settings(settings(options={"flavor": "onprem"}))


def test_registered_as_the_confluence_connector() -> None:
    assert connector_class("confluence") is ConfluenceSource


def test_options_keep_tests_fast_through_from_settings(fake: FakeConfluence) -> None:
    """The backoff comes from options: a burst of 503s costs milliseconds, not seconds."""
    fake.fail(list_path(fake), status(503), status(503))
    options: dict[str, Any] = {
        "flavor": fake.flavor,
        "spaces": ["ENG"],
        "token_env": "CONF_TOKEN",
        "retries": 3,
        "backoff_factor": 0.01,
        "backoff_jitter": 0,
    }
    if fake.flavor == "cloud":
        options["username_env"] = "CONF_USER"
    source = build_source(
        SimpleNamespace(name="wiki", type="confluence", path=None, url=fake.url, options=options)  # type: ignore[arg-type]
    )
    assert len(source.scan().documents) == (5 if fake.flavor == "cloud" else 4)  # DC: no archived


# -- end to end through the engine ---------------------------------------------------------


def test_end_to_end_partial_scan_tombstones_nothing_and_supersession_is_repaired(
    httpserver: HTTPServer, tmp_path: Path
) -> None:
    fake = FakeConfluence(httpserver, "cloud")
    fake.add(
        FakePage("101", "Expenses 2024", "# Expenses\n\nMeals up to 40 EUR.", version=4),
        FakePage(
            "102",
            "Expenses 2025",
            "# Expenses\n\nMeals up to 55 EUR.",
            version=1,
            when="2025-01-02T09:00:00.000Z",
        ),
        FakePage("103", "Runbook", "# Deploy\n\nAnnounce it.", version=7),
        FakePage("104", "On call", "# On call\n\nA recovery day.", version=2),
        FakePage("105", "Travel", "# Travel\n\nBook early.", version=3),
    )
    source = make_source(fake, statuses=("current", "archived", "trashed"))
    table = migrated_table(tmp_path / "table.db")
    index = InMemoryChunkIndex()
    try:
        now = datetime.now(UTC)
        ingest = Ingestor(table=table, index=index, embedder=HashingEmbedder(dim=32))
        report = ingest.run([source], now=now)
        assert report.ok
        assert report.totals()["ingested"] == 5
        rows = {r.doc_id: r for r in table.iter_documents()}
        assert {r.version_state for r in rows.values()} == {VersionState.CURRENT}

        # In Confluence: 2024 is declared superseded by 2025. Then the listing fails after its
        # first page of results, so 103..105 are not seen this time.
        fake.pages["101"].labels.append("superseded")
        fake.pages["101"].properties["superseded_by"] = "102"
        fake.fail("/wiki/api/v2/pages", *(status(500) for _ in range(20)), cursor="c2")

        engine = Reconciler(table=table, index=index, sources=[source])
        later = now + timedelta(days=30)  # well past the missing-in-source grace
        options = Options(
            mode="apply",
            now=later,
            guard=Guard(max_changed_fraction=1.0),
            missing_grace=timedelta(days=1),
            actor="test",
        )
        applied = engine.run(options)
        assert not applied.refused
        assert applied.error is None
        kinds = {(f.check, f.kind, f.doc_id) for f in applied.findings}
        assert ("family", "successor_not_marked", "wiki:101") in kinds
        assert ("hash", "source_unreadable", None) in kinds  # the partial scan, reported
        assert not any(kind == "missing_in_source" for _, kind, _ in kinds)

        rows = {r.doc_id: r for r in table.iter_documents()}
        assert rows["wiki:101"].version_state is VersionState.SUPERSEDED
        assert rows["wiki:101"].superseded_by == "wiki:102"
        for doc_id in ("wiki:103", "wiki:104", "wiki:105"):  # unread, not tombstoned
            assert rows[doc_id].version_state is VersionState.CURRENT
            assert not rows[doc_id].quarantined
        payloads = {c.doc_id: c.payload for c in index.scroll()}
        assert payloads["wiki:101"]["version_state"] == "superseded"
        assert payloads["wiki:101"]["superseded_by"] == "wiki:102"
        assert payloads["wiki:103"]["version_state"] == "current"

        # Healthy again, with 105 really gone: now, and only now, absence counts.
        fake.faults.clear()
        del fake.pages["105"]
        check = engine.run(dataclasses.replace(options, mode="check"))
        missing = [f for f in check.findings if f.kind == "missing_in_source"]
        assert [f.doc_id for f in missing] == ["wiki:105"]
        assert not any(f.doc_id == "wiki:101" and f.check == "family" for f in check.findings)
    finally:
        table.close()


def test_the_documented_examples_load(tmp_path: Path) -> None:
    doc = (Path(__file__).parents[2] / "docs/connectors/confluence.md").read_text("utf-8")
    blocks = re.findall(r"```toml\n(.*?)```", doc, re.S)
    assert len(blocks) == 2
    config = tmp_path / "reconciler.toml"
    config.write_text(
        '[table]\nurl = "sqlite:///t.db"\n[index]\npath = "q"\ncollection = "c"\n'
        + "\n".join(blocks),
        encoding="utf-8",
    )
    sources = build_sources(load_settings(config))
    assert [(s.name, getattr(s, "flavor", None)) for s in sources] == [
        ("wiki", "cloud"),
        ("intranet", "datacenter"),
    ]
