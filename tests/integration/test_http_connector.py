"""The HTTP registry connector against a real local HTTP server (pytest-httpserver) serving the
schema of docs/connectors/http-registry.md: the contract, paging, every way the registry fails,
and what the engine makes of it (findings, and nothing tombstoned by a failure)."""

from __future__ import annotations

import dataclasses
import json
import logging
import socket
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from acceptance_kit import Deployment, day, kinds
from pytest_httpserver import HTTPServer
from registry_kit import FakeRegistry, sha
from werkzeug import Response

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.http import HttpRegistrySource
from connectors.httpclient import HttpPolicy
from connectors.testing import SystemOfRecordContract
from reconciler.clock import ManualClock
from reconciler.model import ProblemKind, SourceSnapshot, VersionState
from reconciler.settings import load_settings

#: Retries kept fast: no backoff sleep (a test that wants Retry-After or backoff waits gives
#: the policy a ManualClock).
FAST = HttpPolicy(connect_timeout=2.0, read_timeout=2.0, retries=3, backoff_factor=0.0)


def corpus(registry: FakeRegistry) -> None:
    """Seven documents over four pages of two: a family of three, two of one, a draft."""
    registry.add(
        "POL-1",
        family="leave",
        version=1,
        status="superseded",
        superseded_by="POL-2",
        effective_from="2023-01-01",
        title="Leave 2023",
    )
    registry.add(
        "POL-2",
        family="leave",
        version=2,
        status="superseded",
        superseded_by="POL-3",
        effective_from="2024-01-01",
    )
    registry.add(
        "POL-3",
        family="leave",
        version=3,
        status="current",
        effective_from="2025-01-01T08:00:00Z",
        doc_class="policy",
    )
    registry.add("SEC-1", family="security", version=1, status="current")
    registry.add("RUN-1", status="current", effective_from="2024-06-01")
    registry.add("DRAFT-1", family="travel", version=1, status="draft")
    registry.add("OLD-1", family="old", version=1, status="retired", effective_to="2024-01-01")


def source(url: str, **kwargs: Any) -> HttpRegistrySource:
    kwargs.setdefault("policy", FAST)
    kwargs.setdefault("page_size", 2)
    return HttpRegistrySource("reg", url, **kwargs)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def problems_of(snapshot: SourceSnapshot) -> list[tuple[ProblemKind, str | None]]:
    return [(p.kind, p.doc_id) for p in snapshot.problems]


@pytest.fixture
def registry(httpserver: HTTPServer) -> FakeRegistry:
    reg = FakeRegistry()
    corpus(reg)
    return reg


@pytest.fixture
def url(registry: FakeRegistry, httpserver: HTTPServer) -> str:
    return registry.serve(httpserver)


# -- the contract ------------------------------------------------------------------------------


class TestHttpContract(SystemOfRecordContract):
    """The registry gives no hashes: the connector fetches each body and hashes it."""

    @pytest.fixture
    def source(self, url: str) -> HttpRegistrySource:
        return source(url)

    @pytest.fixture
    def unavailable_source(self) -> HttpRegistrySource:
        return source(f"http://127.0.0.1:{free_port()}/reg", policy=HttpPolicy(retries=0))


class TestHttpContractWithRegistryHashes(SystemOfRecordContract):
    """The registry gives ``content_hash``: no body is fetched while scanning."""

    @pytest.fixture
    def source(self, httpserver: HTTPServer) -> HttpRegistrySource:
        reg = FakeRegistry(with_hashes=True)
        corpus(reg)
        return source(reg.serve(httpserver))

    @pytest.fixture
    def unavailable_source(self, httpserver: HTTPServer) -> HttpRegistrySource:
        reg = FakeRegistry()
        reg.broken["page:1"] = Response("down", status=503)
        return source(reg.serve(httpserver), policy=HttpPolicy(retries=1, backoff_factor=0))


# -- reading the schema ------------------------------------------------------------------------


def test_pagination_follows_the_cursor_over_every_page(
    registry: FakeRegistry, url: str, httpserver: HTTPServer
) -> None:
    snapshot = source(url).scan()
    assert snapshot.complete
    assert snapshot.problems == ()
    assert [d.source_key for d in snapshot.documents] == sorted(registry.records)
    assert [h for h in registry.hits if h.startswith("page:")] == [
        "page:1",
        "page:2",
        "page:3",
        "page:4",
    ]
    listing = [r for r, _ in httpserver.log if r.path == "/reg/documents"]
    assert [r.args.get("cursor") for r in listing] == [None, "c2", "c4", "c6"]
    assert {r.args.get("limit") for r in listing} == {"2"}


def test_fields_are_mapped_to_the_source_document(url: str) -> None:
    docs = {d.source_key: d for d in source(url).scan().documents}
    pol1, pol3 = docs["POL-1"], docs["POL-3"]
    assert (pol1.doc_id, pol1.family, pol1.version, pol1.state) == (
        "reg:POL-1",
        "leave",
        1,
        VersionState.SUPERSEDED,
    )
    assert pol1.superseded_by == "reg:POL-2"
    assert pol1.title == "Leave 2023"
    assert pol1.effective_from is not None
    assert pol1.effective_from.isoformat() == "2023-01-01T00:00:00+00:00"
    assert pol3.effective_from is not None
    assert pol3.effective_from.hour == 8
    assert pol3.doc_class == "policy"
    assert docs["OLD-1"].effective_to is not None
    assert docs["RUN-1"].family is None


def test_registry_hashes_are_trusted_and_no_body_is_fetched(httpserver: HTTPServer) -> None:
    reg = FakeRegistry(with_hashes=True)
    corpus(reg)
    snapshot = source(reg.serve(httpserver)).scan()
    assert snapshot.complete
    assert not [h for h in reg.hits if h.startswith("body:")]
    assert {d.source_key: d.content_hash for d in snapshot.documents} == {
        k: sha(v) for k, v in reg.bodies.items()
    }


def test_unknown_status_is_an_invalid_field_and_status_map_translates(
    registry: FakeRegistry, url: str
) -> None:
    registry.update("SEC-1", status="approved")
    registry.update("RUN-1", status="obsolete-ish")
    snapshot = source(url, status_map={"approved": "current"}).scan()
    docs = {d.source_key: d for d in snapshot.documents}
    assert docs["SEC-1"].state is VersionState.CURRENT
    assert docs["RUN-1"].state is None  # yielded, the field taken as absent
    [problem] = snapshot.problems
    assert (problem.kind, problem.doc_id) == (ProblemKind.INVALID_FIELD, "reg:RUN-1")
    assert "obsolete-ish" in problem.message
    assert snapshot.complete


def test_supersession_problems_are_reported_not_yielded(registry: FakeRegistry, url: str) -> None:
    registry.update("SEC-1", superseded_by="SEC-9")  # dangling
    registry.update("RUN-1", superseded_by="RUN-1")  # itself
    registry.update("POL-3", superseded_by="POL-1")  # closes a cycle POL-1 -> 2 -> 3 -> 1
    snapshot = source(url).scan()
    docs = {d.source_key: d for d in snapshot.documents}
    assert all(d.superseded_by is None for k, d in docs.items() if k != "DRAFT-1")
    assert sorted(problems_of(snapshot)) == sorted(
        [
            (ProblemKind.DANGLING_SUPERSEDED_BY, "reg:SEC-1"),
            (ProblemKind.SELF_SUPERSESSION, "reg:RUN-1"),
            (ProblemKind.SUPERSESSION_CYCLE, "reg:POL-1"),
            (ProblemKind.SUPERSESSION_CYCLE, "reg:POL-2"),
            (ProblemKind.SUPERSESSION_CYCLE, "reg:POL-3"),
        ]
    )


def test_an_entry_without_id_makes_the_scan_incomplete(registry: FakeRegistry, url: str) -> None:
    registry.records["zzz"] = {"title": "no id here"}
    snapshot = source(url).scan()
    assert not snapshot.complete  # it may be any registered document: no deletion this run
    assert len(snapshot.documents) == 7
    [problem] = snapshot.problems
    assert problem.kind is ProblemKind.INVALID_FIELD
    assert problem.path == "page 4, documents[1]"


def test_duplicate_ids_keep_the_first(registry: FakeRegistry, url: str) -> None:
    registry.records["SEC-1x"] = {"id": "SEC-1", "title": "again"}
    snapshot = source(url).scan()
    assert [d.title for d in snapshot.documents if d.source_key == "SEC-1"] == [None]
    assert problems_of(snapshot) == [(ProblemKind.DUPLICATE_ID, "reg:SEC-1")]


def test_body_url_is_followed_on_the_registry_only(
    registry: FakeRegistry, url: str, httpserver: HTTPServer
) -> None:
    registry.update("SEC-1", body_url="documents/SEC-1/body?rendition=markdown")
    registry.update("RUN-1", body_url="https://elsewhere.example/steal")
    src = source(url)
    snapshot = src.scan()
    assert src.read_body("SEC-1") == registry.bodies["SEC-1"]
    assert any(
        r.path == "/reg/documents/SEC-1/body" and r.args.get("rendition") == "markdown"
        for r, _ in httpserver.log
    )
    assert problems_of(snapshot) == [(ProblemKind.INVALID_FIELD, "reg:RUN-1")]
    assert src.read_body("RUN-1") == registry.bodies["RUN-1"]  # the default path


def test_ids_are_quoted_in_body_paths(registry: FakeRegistry, url: str) -> None:
    registry.add("HR/2024 leave?", status="current")
    src = source(url)
    docs = {d.source_key for d in src.scan().documents}
    assert "HR/2024 leave?" in docs
    assert src.read_body("HR/2024 leave?") == registry.bodies["HR/2024 leave?"]


# -- failures ----------------------------------------------------------------------------------


def test_429_with_retry_after_then_success(registry: FakeRegistry, url: str) -> None:
    registry.script["page:2"] = [Response("slow down", status=429, headers={"Retry-After": "1"})]
    clock = ManualClock()
    started = clock.monotonic()
    snapshot = source(url, policy=dataclasses.replace(FAST, clock=clock)).scan()
    assert clock.monotonic() - started >= 1.0  # Retry-After was honoured
    assert clock.sleeps == [1.0]  # on the clock, not in real time
    assert snapshot.complete
    assert len(snapshot.documents) == 7
    assert registry.hits.count("page:2") == 2


def test_retry_after_as_a_date_is_read_against_the_clock(registry: FakeRegistry, url: str) -> None:
    clock = ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    later = "Thu, 01 Jan 2026 00:00:05 GMT"  # 5 s after the clock's now
    registry.script["page:2"] = [Response("slow down", status=429, headers={"Retry-After": later})]
    snapshot = source(url, policy=dataclasses.replace(FAST, clock=clock)).scan()
    assert clock.sleeps == [5.0]
    assert snapshot.complete


def test_backoff_grows_exponentially_on_the_clock(registry: FakeRegistry, url: str) -> None:
    registry.script["page:1"] = [Response("busy", status=503)] * 3
    clock = ManualClock()
    policy = HttpPolicy(retries=3, backoff_factor=0.5, backoff_jitter=0.0, clock=clock)
    snapshot = source(url, policy=policy).scan()
    assert snapshot.complete
    assert registry.hits.count("page:1") == 4
    assert clock.sleeps == [1.0, 2.0]  # no wait before the first retry, then 0.5 * 2**n


def test_a_burst_of_503s_is_retried(registry: FakeRegistry, url: str) -> None:
    registry.script["page:1"] = [Response("busy", status=503)] * 3
    registry.script["body:SEC-1"] = [Response("busy", status=503)] * 2
    snapshot = source(url).scan()
    assert snapshot.complete
    assert len(snapshot.documents) == 7
    assert registry.hits.count("page:1") == 4


def test_503s_beyond_the_retries_mid_listing_give_a_partial_snapshot(
    registry: FakeRegistry, url: str
) -> None:
    registry.broken["page:3"] = Response("down", status=503)
    snapshot = source(url).scan()
    assert not snapshot.complete
    assert [d.source_key for d in snapshot.documents] == ["DRAFT-1", "OLD-1", "POL-1", "POL-2"]
    [problem] = snapshot.problems
    assert (problem.kind, problem.doc_id) == (ProblemKind.UNREADABLE, None)
    assert "page 3" in problem.message
    # POL-2's successor is on the unread page: the pointer is kept, not reported as dangling.
    assert {d.source_key: d.superseded_by for d in snapshot.documents}["POL-2"] == "reg:POL-3"


def test_503s_on_the_first_page_make_the_source_unavailable(
    registry: FakeRegistry, url: str
) -> None:
    registry.broken["page:1"] = Response("down", status=503)
    with pytest.raises(SourceUnavailable, match="503"):
        source(url).scan()


def test_a_failing_body_endpoint_never_gives_an_empty_snapshot(
    registry: FakeRegistry, url: str
) -> None:
    for doc_id in registry.records:
        registry.broken[f"body:{doc_id}"] = Response("down", status=502)
    with pytest.raises(SourceUnavailable, match="502"):
        source(url).scan()
    # After the first body failure no other body is requested.
    assert len([h for h in registry.hits if h.startswith("body:")]) == 1 + FAST.retries


@pytest.fixture
def threaded_server() -> Iterator[HTTPServer]:
    """A server that answers while another request is still sleeping."""
    server = HTTPServer(threaded=True)
    server.start()
    yield server
    server.clear()
    server.stop()


def test_a_read_timeout(registry: FakeRegistry, threaded_server: HTTPServer) -> None:
    url = registry.serve(threaded_server)

    def slow() -> Response:
        time.sleep(0.6)
        return Response(json.dumps({"documents": [], "next_cursor": None}))

    policy = HttpPolicy(connect_timeout=2.0, read_timeout=0.2, retries=1, backoff_factor=0.0)
    registry.broken["page:2"] = slow
    snapshot = source(url, policy=policy).scan()
    assert not snapshot.complete
    assert [d.source_key for d in snapshot.documents] == ["DRAFT-1", "OLD-1"]
    assert "timed out" in snapshot.problems[0].message
    registry.broken["page:1"] = slow
    with pytest.raises(SourceUnavailable, match="timed out"):
        source(url, policy=policy).scan()


@pytest.mark.parametrize("status", [401, 403])
def test_401_and_403_are_config_errors_naming_the_variable_not_the_token(
    registry: FakeRegistry,
    url: str,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    status: int,
) -> None:
    secret = "s3cr3t-t0ken-value"
    monkeypatch.setenv("DMS_TOKEN", secret)
    registry.broken["page:1"] = Response("denied", status=status)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ConnectorConfigError) as raised:
        source(url, token_env="DMS_TOKEN").scan()
    assert str(status) in str(raised.value)
    assert "DMS_TOKEN" in str(raised.value)
    assert secret not in str(raised.value)
    assert secret not in caplog.text
    assert registry.auth_seen[-1] == f"Bearer {secret}"
    assert registry.hits.count("page:1") == 1  # never retried


def test_the_bearer_token_is_sent_and_a_missing_one_is_named(
    httpserver: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    reg = FakeRegistry(token="right")
    corpus(reg)
    url = reg.serve(httpserver)
    monkeypatch.setenv("DMS_TOKEN", "right")
    assert len(source(url, token_env="DMS_TOKEN").scan().documents) == 7
    assert set(reg.auth_seen) == {"Bearer right"}
    with pytest.raises(ConnectorConfigError, match="no token is sent"):
        source(url).scan()
    monkeypatch.delenv("DMS_TOKEN")
    with pytest.raises(ConnectorConfigError, match=r"DMS_TOKEN \(options.token_env\) is not set"):
        source(url, token_env="DMS_TOKEN").scan()


def test_404_for_a_deleted_documents_body_is_that_documents_problem(
    registry: FakeRegistry, url: str
) -> None:
    del registry.bodies["SEC-1"]
    src = source(url)
    snapshot = src.scan()
    assert snapshot.complete
    assert "SEC-1" not in {d.source_key for d in snapshot.documents}
    assert len(snapshot.documents) == 6
    [problem] = snapshot.problems
    assert (problem.kind, problem.doc_id, problem.source_key) == (
        ProblemKind.UNREADABLE,
        "reg:SEC-1",
        "SEC-1",
    )
    with pytest.raises(DocumentUnreadable, match="404"):
        src.read_body("SEC-1")


def test_an_undecodable_body_is_that_documents_problem(registry: FakeRegistry, url: str) -> None:
    registry.broken["body:RUN-1"] = Response(b"caf\xe9", content_type="text/plain")
    snapshot = source(url).scan()
    assert problems_of(snapshot) == [(ProblemKind.UNDECODABLE, "reg:RUN-1")]
    assert snapshot.complete


def test_malformed_json(registry: FakeRegistry, url: str) -> None:
    registry.broken["page:2"] = Response("{not json", content_type="application/json")
    snapshot = source(url).scan()
    assert not snapshot.complete
    assert len(snapshot.documents) == 2
    assert "malformed JSON" in snapshot.problems[0].message
    registry.broken["page:1"] = Response('{"items": []}', content_type="application/json")
    with pytest.raises(SourceUnavailable, match="'documents' must be a list"):
        source(url).scan()


def test_a_repeated_cursor_stops_the_scan(registry: FakeRegistry, url: str) -> None:
    page = json.dumps({"documents": [registry.records["SEC-1"]], "next_cursor": "c2"})
    registry.broken["page:2"] = Response(page, content_type="application/json")
    snapshot = source(url).scan()
    assert not snapshot.complete
    assert "repeats cursor" in snapshot.problems[-1].message


# -- configuration -----------------------------------------------------------------------------


def test_config_problems_are_listed_at_load_time(tmp_path: Path) -> None:
    config = tmp_path / "reconciler.toml"
    config.write_text(
        "[[sources]]\n"
        'name = "dms"\n'
        'type = "http"\n'
        'url = "https://user:pw@dms.example/api?x=1"\n'
        "[sources.options]\n"
        'token = "abc"\n'
        'token_env = "RECONCILER_TOKEN"\n'
        "page_size = 0\n"
        "read_timeout = 0\n"
        'status_map = { approved = "in-force" }\n'
        "colour = 1\n",
        encoding="utf-8",
    )
    from reconciler.errors import ConfigError  # noqa: PLC0415

    with pytest.raises(ConfigError) as raised:
        load_settings(config)
    text = str(raised.value)
    for expected in (
        "sources[0].url: credentials never go in the URL",
        "sources[0].url: the base URL takes no query string",
        "sources[0].options.token: secrets are never read from the config file",
        "sources[0].options.token_env: RECONCILER_TOKEN",
        "sources[0].options.page_size: a positive integer",
        "sources[0].options.read_timeout: a positive number of seconds",
        "sources[0].options.status_map.approved: must be one of",
        "sources[0].options.colour: unknown option",
    ):
        assert expected in text, expected
    assert "abc" not in text


def test_from_settings_reads_the_options(tmp_path: Path) -> None:
    config = tmp_path / "reconciler.toml"
    config.write_text(
        "[[sources]]\n"
        'name = "dms"\n'
        'type = "http"\n'
        'url = "https://dms.example/api/"\n'
        "[sources.options]\n"
        'token_env = "DMS_TOKEN"\n'
        "page_size = 50\n"
        "retries = 2\n"
        "read_timeout = 7.5\n"
        'ca_file = "certs/ca.pem"\n',
        encoding="utf-8",
    )
    settings = load_settings(config)
    src = HttpRegistrySource.from_settings(settings.sources[0])
    assert src.url == "https://dms.example/api"
    assert (src.token_env, src.page_size) == ("DMS_TOKEN", 50)
    assert (src.policy.retries, src.policy.read_timeout) == (2, 7.5)
    assert src.ca_file == str(tmp_path / "certs" / "ca.pem")  # relative to the config file


# -- through the engine ------------------------------------------------------------------------


class HttpDeployment(Deployment):
    """The acceptance kit's deployment with one http source instead of the vault."""

    def __init__(self, root: Path, url: str) -> None:
        self.url = url
        super().__init__(root)

    def configure(self, **_: Any) -> None:
        self.config.write_text(
            "\n".join(
                [
                    "[table]",
                    f'url = "{self.table_url}"',
                    "[index]",
                    'path = "qdrant"',
                    "[[sources]]",
                    'name = "reg"',
                    'type = "http"',
                    f'url = "{self.url}"',
                    "[sources.options]",
                    "page_size = 2",
                    "retries = 1",
                    "backoff_factor = 0",
                    "[guard]",
                    "max_changed_fraction = 1.0",
                    "[policy]",
                    # A document absent from a complete scan is retired at once: so a
                    # failure read as a deletion would show in these tests.
                    'missing_in_source_grace = "0s"',
                ]
            )
            + "\n",
            encoding="utf-8",
        )


@pytest.fixture
def deployed(registry: FakeRegistry, url: str, tmp_path: Path) -> HttpDeployment:
    registry.update("POL-3", effective_from=day(-30))
    deployment = HttpDeployment(tmp_path, url)
    report = deployment.init_ingest()
    assert report["totals"]["ingested"] == 7
    code, data = deployment.json("check")
    assert code == 0, data["findings"]
    return deployment


def states(deployment: Deployment) -> dict[str, tuple[str, bool]]:
    return {k: (r["version_state"], r["quarantined"]) for k, r in deployment.rows().items()}


def test_engine_a_partial_listing_is_reported_and_tombstones_nothing(
    registry: FakeRegistry, deployed: HttpDeployment
) -> None:
    before, served = states(deployed), deployed.served()
    registry.broken["page:3"] = Response("down", status=503)
    code, data = deployed.json("check")
    assert code == 2
    assert ("hash", "source_unreadable", None) in kinds(data)
    assert not [f for f in data["findings"] if f["kind"] == "missing_in_source"]
    code, data = deployed.json("apply")
    assert (code, data["status"]) == (4, "partial"), data  # a partial listing: not a success
    assert states(deployed) == before
    assert deployed.served() == served


def test_engine_an_unreachable_registry_tombstones_nothing(
    registry: FakeRegistry, deployed: HttpDeployment
) -> None:
    before, served = states(deployed), deployed.served()
    registry.broken["page:1"] = Response("{not json", content_type="application/json")
    code, data = deployed.json("check")
    assert code == 2
    [finding] = data["findings"]
    assert (finding["check"], finding["kind"], finding["severity"]) == (
        "hash",
        "source_unreadable",
        "critical",
    )
    assert "malformed JSON" in finding["actual"]["error"]
    deployed.json("apply")
    assert states(deployed) == before
    assert deployed.served() == served


def test_engine_a_deleted_body_is_that_documents_finding_not_a_deletion(
    registry: FakeRegistry, deployed: HttpDeployment
) -> None:
    before = states(deployed)
    del registry.bodies["SEC-1"]
    code, data = deployed.json("check")
    assert code == 2
    assert kinds(data) == {("hash", "source_unreadable", "reg:SEC-1")}
    deployed.json("apply")
    assert states(deployed) == before


def test_engine_an_unknown_status_is_that_documents_finding(
    registry: FakeRegistry, deployed: HttpDeployment
) -> None:
    registry.update("SEC-1", status="withdrawn-pending-review")
    code, data = deployed.json("check")
    assert code == 2
    assert ("family", "invalid_source_document", "reg:SEC-1") in kinds(data)


def test_engine_control_a_real_deletion_and_a_real_retirement_are_repaired(
    registry: FakeRegistry, deployed: HttpDeployment
) -> None:
    """The control of the tests above: the same setup does tombstone a real deletion."""
    del registry.records["RUN-1"]
    registry.update("SEC-1", status="retired")
    code, data = deployed.json("check")
    assert code == 2
    assert {
        ("family", "missing_in_source", "reg:RUN-1"),
        ("family", "retired_in_source", "reg:SEC-1"),
    } <= kinds(data)
    code, data = deployed.json("apply")
    assert code == 0, data
    after = states(deployed)
    assert after["reg:RUN-1"][0] == after["reg:SEC-1"][0] == "retired"
    assert "reg:SEC-1" not in deployed.served()
    assert deployed.json("check")[0] == 0


def test_a_change_is_dated_by_the_listing_last_modified(registry: FakeRegistry, url: str) -> None:
    """``changed_at`` (serve's watch dates a change so): the listing's ``Last-Modified`` as
    the last scan read it; None without the header (the change is then dated when seen)."""
    src = source(url)
    src.scan()
    assert src.changed_at("RUN-1") is None
    registry.modified = "Wed, 21 Oct 2015 07:28:00 GMT"
    src.scan()
    assert src.changed_at("RUN-1") == datetime(2015, 10, 21, 7, 28, tzinfo=UTC)
