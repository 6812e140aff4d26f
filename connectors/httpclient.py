"""HTTP hygiene shared by the HTTP connectors: one ``requests.Session`` per connector with
connect/read timeouts and urllib3 ``Retry`` (429 and 5xx, ``Retry-After`` honoured,
exponential backoff with jitter, GET only), bounds on every answer (a ``deadline`` on its
body, however slowly the server trickles bytes, and ``max_response_bytes``, however large its
listing), redirects to another host refused unless ``redirect_hosts`` names it,
and every failure mapped once, here, to the connector contract's errors:
``SourceUnavailable`` (stop this source, retry later), ``DocumentUnreadable`` (skip this
document), ``ConnectorConfigError`` (fix the config).

The waits between retries (``Retry-After``, backoff) are taken on the policy's ``clock``
(``reconciler.clock``, the real one by default): a test passes a ``ManualClock`` and a
``Retry-After: 2`` costs no real time. Connect and read timeouts are the socket's, real."""

from __future__ import annotations

import email.utils
import logging
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Self
from urllib.parse import urljoin, urlsplit, urlunsplit

import requests
import urllib3
from requests.adapters import HTTPAdapter
from urllib3 import BaseHTTPResponse
from urllib3.exceptions import ReadTimeoutError
from urllib3.util.retry import Retry

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.ports.source import stop_requested

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(frozen=True)
class HttpPolicy:
    """Timeouts and retries of one connector's session."""

    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    retries: int = 5
    backoff_factor: float = 0.5
    backoff_max: float = 30.0
    backoff_jitter: float = 0.25
    #: Seconds an answer may take from its headers to its last byte (a server that trickles a
    #: byte every few seconds never trips ``read_timeout``). Real time, as sockets are. The
    #: connection and the headers are bounded by the timeouts and the retries.
    deadline: float = 120.0
    #: Bytes one answer may hold (decompressed), checked as it arrives.
    max_response_bytes: int = 256 * 1024 * 1024
    #: Hosts besides the request's own that a redirect may lead to.
    redirect_hosts: frozenset[str] = frozenset()
    #: Where the waits between retries are taken (not part of the policy's value).
    clock: Clock = field(default=SYSTEM_CLOCK, compare=False, repr=False)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> HttpPolicy:
        """Read the options of ``options.HttpPolicyOptions`` that are given."""
        fields = {
            "connect_timeout",
            "read_timeout",
            "retries",
            "backoff_factor",
            "backoff_max",
            "deadline",
            "max_response_bytes",
        }
        given: dict[str, Any] = {k: options[k] for k in fields if k in options}
        if options.get("redirect_hosts"):
            given["redirect_hosts"] = frozenset(h.lower() for h in options["redirect_hosts"])
        return cls(**given)


class RedirectRefused(requests.exceptions.RequestException):
    """A redirect to a host the policy does not allow."""


class _Session(requests.Session):
    """A session that follows a redirect only to the same host (or one it is told of)."""

    redirect_hosts: frozenset[str] = frozenset()

    def get_redirect_target(self, resp: requests.Response) -> str | None:
        target = super().get_redirect_target(resp)
        if target is None:
            return None
        here, there = urlsplit(resp.url), urlsplit(urljoin(resp.url, target))
        same = (here.hostname, here.port) == (there.hostname, there.port)
        downgrade = here.scheme == "https" and there.scheme != "https"
        if (not same and (there.hostname or "").lower() not in self.redirect_hosts) or downgrade:
            resp.close()  # a streamed answer holds its connection until closed
            raise RedirectRefused(redact(urljoin(resp.url, target)), response=resp)
        return target


class ClockedRetry(Retry):
    """urllib3's ``Retry`` whose waits (``Retry-After``, backoff) are taken on ``clock``, and
    whose ``Retry-After: <HTTP-date>`` is read against that clock's now."""

    def __init__(self, *args: Any, clock: Clock = SYSTEM_CLOCK, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clock = clock

    def new(self, **kw: Any) -> Self:
        retry = super().new(**kw)
        retry.clock = self.clock
        return retry

    def parse_retry_after(self, retry_after: str) -> float:
        if re.match(r"^\s*[0-9]+\s*$", retry_after):
            return super().parse_retry_after(retry_after)
        when = email.utils.parsedate_tz(retry_after)
        if when is None:
            return super().parse_retry_after(retry_after)  # raises InvalidHeader
        seconds = max(email.utils.mktime_tz(when) - self.clock.now().timestamp(), 0.0)
        limit = getattr(self, "retry_after_max", None)  # the cap of newer urllib3 versions
        return seconds if limit is None else min(seconds, float(limit))

    def sleep_for_retry(self, response: BaseHTTPResponse) -> bool:
        retry_after = self.get_retry_after(response)
        if retry_after:
            _unless_stopped("before a retry")
            self.clock.sleep(retry_after)
            return True
        return False

    def _sleep_backoff(self) -> None:
        _unless_stopped("before a retry")
        backoff = self.get_backoff_time()
        if backoff > 0:
            self.clock.sleep(backoff)


def _unless_stopped(where: str) -> None:
    """Raise ``SourceUnavailable`` when the scan was asked to stop (``stop_requested``)."""
    if (why := stop_requested()) is not None:
        raise SourceUnavailable(f"stopped reading {where}: {why}")


def make_session(policy: HttpPolicy, *, user_agent: str = "corpus-reconciler") -> requests.Session:
    """A session that retries idempotent reads and nothing else, waiting on ``policy.clock``."""
    retry = ClockedRetry(
        total=policy.retries,
        connect=policy.retries,
        read=policy.retries,
        status=policy.retries,
        status_forcelist=sorted(RETRY_STATUSES),
        allowed_methods=frozenset({"GET", "HEAD"}),
        backoff_factor=policy.backoff_factor,
        backoff_max=policy.backoff_max,
        backoff_jitter=policy.backoff_jitter,
        respect_retry_after_header=True,
        raise_on_status=False,  # the last response is returned and mapped below
        clock=policy.clock,
    )
    adapter = HTTPAdapter(max_retries=retry)
    session = _Session()
    session.redirect_hosts = policy.redirect_hosts
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    session.headers["User-Agent"] = user_agent
    session.headers["Accept"] = "application/json"
    return session


def redact(url: str) -> str:
    """A URL safe to log: no user info, no query string (tokens hide there)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def get_json(
    session: requests.Session,
    url: str,
    *,
    policy: HttpPolicy,
    params: Mapping[str, Any] | None = None,
    source: str,
    document: str | None = None,
) -> tuple[Any, requests.Response]:
    """GET a JSON document; map every failure to the contract's error types.

    ``document`` names the one document the request is about: then a 404 or 410 is that
    document's problem (``DocumentUnreadable``), not the source's.
    """
    response = get_response(
        session, url, policy=policy, params=params, source=source, document=document
    )
    try:
        return response.json(), response
    except ValueError:
        where = redact(url)
        if document is not None:
            raise DocumentUnreadable(f"{source}: {document}: malformed JSON from {where}") from None
        raise SourceUnavailable(f"{source}: malformed JSON from {where}") from None


def get_response(
    session: requests.Session,
    url: str,
    *,
    policy: HttpPolicy,
    params: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    source: str,
    document: str | None = None,
) -> requests.Response:
    """GET anything (a body, a text file); the same error mapping as ``get_json``.

    The caller decodes the response. A read timeout that outlived every retry is reported as
    a timeout, not as a connection failure.
    """
    where = redact(url)
    try:
        response = session.get(
            url,
            params=params,
            headers=dict(headers or {}),
            timeout=(policy.connect_timeout, policy.read_timeout),
            stream=True,  # the body is read below, within the deadline and the size limit
        )
    except RedirectRefused as exc:
        raise SourceUnavailable(
            f"{source}: {where} redirects to {exc} (another host, or https to http): refused "
            "(add its host to options.redirect_hosts if the move is expected, or point url at it)"
        ) from None
    except requests.exceptions.RetryError as exc:
        raise SourceUnavailable(f"{source}: {where} kept failing after retries ({exc})") from None
    except requests.exceptions.Timeout:
        raise SourceUnavailable(
            f"{source}: {where} timed out (connect {policy.connect_timeout}s, read "
            f"{policy.read_timeout}s); retry later or raise the timeouts"
        ) from None
    except requests.exceptions.ConnectionError as exc:
        reason = getattr(exc.args[0], "reason", None) if exc.args else None
        if isinstance(reason, ReadTimeoutError):
            raise SourceUnavailable(
                f"{source}: {where} timed out (read {policy.read_timeout}s, "
                f"{policy.retries} retries); retry later or raise read_timeout"
            ) from None
        raise SourceUnavailable(
            f"{source}: cannot connect to {where}: {type(exc).__name__}"
        ) from None
    except requests.exceptions.RequestException as exc:
        raise SourceUnavailable(
            f"{source}: request to {where} failed: {type(exc).__name__}"
        ) from None
    status = response.status_code
    if status >= 400:
        response.close()
    else:
        _read_body(response, policy, where=where, source=source, document=document)
    if status in (401, 403):
        raise ConnectorConfigError(
            f"{source}: {where} answered {status} ({'unauthorised' if status == 401 else 'forbidden'}): "
            "check the credentials' environment variable and their permissions"
        )
    if status in (404, 410) and document is not None:
        raise DocumentUnreadable(f"{source}: {document} is gone ({status} at {where})")
    if status == 404:
        raise SourceUnavailable(f"{source}: {where} not found (404): check the source's url")
    if status >= 400:
        raise SourceUnavailable(f"{source}: {where} answered {status} after retries; retry later")
    return response


def _read_body(
    response: requests.Response,
    policy: HttpPolicy,
    *,
    where: str,
    source: str,
    document: str | None,
) -> None:
    """Read the body into the response within ``policy.deadline`` (from its headers to its
    last byte) and ``policy.max_response_bytes``.

    An answer too large is that answer's problem (a document's body: ``DocumentUnreadable``,
    the others are still read). A server that stalls or breaks off mid-answer is the source's
    (``SourceUnavailable``): the next body would stall the same way, and a scan that skipped
    them all would pass for complete.
    """
    started = time.monotonic()
    too_large = DocumentUnreadable if document is not None else SourceUnavailable
    about = f"{source}: {document}: " if document is not None else f"{source}: "
    limit = policy.max_response_bytes
    declared = response.headers.get("Content-Length", "")
    if declared.isdigit() and int(declared) > limit:
        response.close()
        raise too_large(
            f"{about}{where} answers {int(declared):,} bytes, more than max_response_bytes "
            f"({limit:,}); not read (raise max_response_bytes, or a smaller page_size)"
        )
    chunks: list[bytes] = []
    size = 0
    try:
        # read1: whatever has arrived, so the deadline is checked between any two bytes
        # (iter_content's read(n) would wait for n bytes, or the whole trickled body).
        while chunk := response.raw.read1(64 * 1024, decode_content=True):
            size += len(chunk)
            if size > limit:
                raise too_large(
                    f"{about}{where} answered more than max_response_bytes ({limit:,}); not "
                    "read (raise max_response_bytes, or a smaller page_size)"
                )
            _unless_stopped(f"{where} after {size:,} bytes")
            if time.monotonic() - started > policy.deadline:
                raise SourceUnavailable(
                    f"{about}{where} took longer than the deadline ({policy.deadline:g}s) "
                    f"to send its answer, {size:,} bytes so far; retry later or raise deadline"
                )
            chunks.append(chunk)
    except (requests.exceptions.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
        raise SourceUnavailable(
            f"{about}{where}: the answer broke off ({type(exc).__name__}); retry later"
        ) from None
    finally:
        response.close()
    response._content = b"".join(chunks)  # what .content, .text and .json() then read


def base_url_problems(url: str, *, example: str, credentials: str) -> list[tuple[str, str]]:
    """What is wrong with a source's base URL (scheme, host, no credentials, no query)."""
    problems: list[tuple[str, str]] = []
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        problems.append(("url", f"an http(s):// URL such as {example}"))
    if parts.username or parts.password:
        problems.append(("url", f"credentials never go in the URL; {credentials}"))
    if parts.query or parts.fragment:
        problems.append(("url", "the base URL takes no query string or fragment"))
    return problems
