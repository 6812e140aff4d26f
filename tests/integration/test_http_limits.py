"""Every HTTP answer is bounded (issue 24, items 4 and 10): a whole-request deadline however
slowly a server trickles bytes, a maximum answer size however large its listing, and no
redirect to another host unless the source's options name it. Against real local servers: a
raw socket server that trickles or floods, and pytest-httpserver for redirects. Real time
here (sockets), a second or two at most; the waits are events, not fixed sleeps.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from pytest_httpserver import HTTPServer
from raw_server_kit import RawServer
from werkzeug import Response

from connectors.base import DocumentUnreadable, SourceUnavailable
from connectors.http import HttpRegistrySource
from connectors.httpclient import HttpPolicy, get_json, get_response, make_session
from reconciler.ports.source import stop_requested, stoppable


@pytest.fixture
def servers() -> Iterator[list[RawServer]]:
    started: list[RawServer] = []
    yield started
    for server in started:
        server.close()


def test_a_server_that_trickles_bytes_is_cut_at_the_deadline(servers: list[RawServer]) -> None:
    body = b'{"documents": []}' + b" " * 200
    server = RawServer(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body,
        trickle=0.05,  # 217 bytes: 11 s in all, and never 1 s without a byte
    )
    servers.append(server)
    policy = HttpPolicy(read_timeout=1.0, deadline=0.5, retries=0)
    started = time.monotonic()
    with (
        make_session(policy) as session,
        pytest.raises(SourceUnavailable, match=r"took longer than the deadline \(0.5s\)"),
    ):
        get_json(session, server.url, policy=policy, source="reg")
    assert time.monotonic() - started < 3.0
    # a body that stalls is the source's problem, not one document's: the next would too
    with (
        make_session(policy) as session,
        pytest.raises(SourceUnavailable, match=r"reg: doc-1: .* took longer than the deadline"),
    ):
        get_response(session, server.url, policy=policy, source="reg", document="doc-1")


def test_an_answer_larger_than_the_limit_is_refused_declared_or_not(
    servers: list[RawServer],
) -> None:
    declared = RawServer(b"HTTP/1.1 200 OK\r\nContent-Length: 2147483648\r\n\r\n")
    flood = RawServer(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
        flood=4 * 1024 * 1024,
    )
    servers += [declared, flood]
    policy = HttpPolicy(retries=0, max_response_bytes=1024 * 1024)
    with (
        make_session(policy) as session,
        pytest.raises(SourceUnavailable, match="answers 2,147,483,648 bytes, more than"),
    ):
        get_json(session, declared.url, policy=policy, source="reg")
    with (
        make_session(policy) as session,
        pytest.raises(SourceUnavailable, match=r"more than max_response_bytes \(1,048,576\)"),
    ):
        get_json(session, flood.url, policy=policy, source="reg")
    # one document's body too large is that document's problem: the others are still read
    with (
        make_session(policy) as session,
        pytest.raises(DocumentUnreadable, match=r"reg: doc-1: .*more than max_response_bytes"),
    ):
        get_response(session, declared.url, policy=policy, source="reg", document="doc-1")


def test_a_registry_whose_listing_is_too_large_is_unavailable_not_empty(
    servers: list[RawServer],
) -> None:
    flood = RawServer(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
        flood=2 * 1024 * 1024,
    )
    servers.append(flood)
    source = HttpRegistrySource(
        "reg", flood.url, policy=HttpPolicy(retries=0, max_response_bytes=512 * 1024)
    )
    with pytest.raises(SourceUnavailable, match="max_response_bytes"):
        source.scan()
    source.close()


def _redirect(httpserver: HTTPServer, to: str) -> str:
    httpserver.expect_request("/reg/documents").respond_with_response(
        Response(status=302, headers={"Location": to})
    )
    httpserver.expect_request("/moved/documents").respond_with_json({"documents": []})
    return httpserver.url_for("/reg/documents")


def test_a_redirect_to_another_host_is_refused_unless_allowed(httpserver: HTTPServer) -> None:
    other = f"http://127.0.0.1:{httpserver.port}/moved/documents"  # served as "localhost"
    url = _redirect(httpserver, other)
    policy = HttpPolicy(retries=0)
    with (
        make_session(policy) as session,
        pytest.raises(SourceUnavailable, match="another host, or https to http") as refused,
    ):
        get_json(session, url, policy=policy, source="reg")
    assert "options.redirect_hosts" in str(refused.value)
    assert [r.path for r, _ in httpserver.log] == ["/reg/documents"]  # never asked
    allowed = HttpPolicy(retries=0, redirect_hosts=frozenset({"127.0.0.1"}))
    with make_session(allowed) as session:
        data, _ = get_json(session, url, policy=allowed, source="reg")
    assert data == {"documents": []}


def test_a_redirect_on_the_same_host_is_followed(httpserver: HTTPServer) -> None:
    url = _redirect(httpserver, httpserver.url_for("/moved/documents"))
    policy = HttpPolicy(retries=0)
    with make_session(policy) as session:
        data, _ = get_json(session, url, policy=policy, source="reg")
    assert data == {"documents": []}


def test_the_limits_are_options_checked_at_load() -> None:
    def problems(**options: object) -> dict[str, str]:
        entry = SimpleNamespace(
            name="reg", url="https://dms.example.com/api", path=None, options=options
        )
        return dict(HttpRegistrySource.config_problems(entry))

    assert (
        problems(deadline=60, max_response_bytes=10_000_000, redirect_hosts=["cdn.example.com"])
        == {}
    )
    found = problems(deadline=0, max_response_bytes=-1, redirect_hosts=["https://cdn.example.com"])
    assert set(found) == {
        "options.deadline",
        "options.max_response_bytes",
        "options.redirect_hosts",
    }
    policy = HttpPolicy.from_options({"deadline": 60, "redirect_hosts": ["CDN.example.com"]})
    assert policy.deadline == 60
    assert policy.redirect_hosts == frozenset({"cdn.example.com"})


def test_a_stop_request_ends_a_trickled_answer_between_two_bytes(
    servers: list[RawServer],
) -> None:
    """serve's job deadline reaches into a source read: asked to stop (``stoppable``), the
    client gives up at the next byte, long before its own deadline."""
    body = b'{"documents": []}' + b" " * 2000
    server = RawServer(
        b"HTTP/1.1 200 OK\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body,
        trickle=0.05,  # 100 s in all
    )
    servers.append(server)
    policy = HttpPolicy(read_timeout=5.0, deadline=600, retries=0)
    asked_at = time.monotonic() + 0.5

    def reason() -> str | None:
        return "the job passed its deadline" if time.monotonic() > asked_at else None

    with (
        make_session(policy) as session,
        stoppable(reason),
        pytest.raises(SourceUnavailable, match=r"stopped reading .* the job passed its deadline"),
    ):
        get_json(session, server.url, policy=policy, source="reg")
    assert time.monotonic() - asked_at < 2.0
    assert stop_requested() is None  # only within the block
