"""Confluence's REST API as the connector speaks it: Cloud REST v2 (``/wiki/api/v2``, cursor
paging) or Data Center / Server REST v1 (``/rest/api``, start/limit paging), authenticated from
environment variables read at each scan (rotated tokens are picked up).

Requests go through one session per connector (connectors/httpclient.py): timeouts, retries of
429/5xx honouring ``Retry-After``, GET only. 401/403 raise ``ConnectorConfigError`` naming the
token's environment variable, never its value; a next-page link that leaves the site is never
followed (the credentials would go with it). A request made for one page (``document``) fails
with ``DocumentUnreadable``, any other with ``SourceUnavailable``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import requests
from requests.auth import AuthBase, HTTPBasicAuth

from connectors.base import (
    ConnectorConfigError,
    ConnectorError,
    DocumentUnreadable,
    SourceUnavailable,
)
from connectors.httpclient import HttpPolicy, get_json, redact
from connectors.options import is_integer

__all__ = ["ConfluenceClient", "dig", "label_names", "next_link", "results"]

log = logging.getLogger(__name__)


class _Bearer(AuthBase):
    """``Authorization: Bearer`` with a Data Center personal access token."""

    def __init__(self, token: str) -> None:
        self._token = token

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        request.headers["Authorization"] = f"Bearer {self._token}"
        return request

    def __repr__(self) -> str:
        return "_Bearer(<redacted>)"


class ConfluenceClient:
    """GET requests to one Confluence site, paged and authenticated, for the source ``name``."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        flavor: str,
        token_env: str,
        username_env: str | None,
        page_size: int,
        policy: HttpPolicy,
        session: requests.Session,
    ) -> None:
        self.name = name
        self.flavor = flavor
        self.token_env = token_env
        self.username_env = username_env
        self.page_size = page_size
        self.policy = policy
        self.session = session
        base = url.rstrip("/")
        if flavor == "cloud":
            self.site = base.removesuffix("/wiki")
            self.api = f"{self.site}/wiki/api/v2"
        else:
            self.site = base
            self.api = f"{base}/rest/api"
        parts = urlsplit(base)
        self._origin = f"{parts.scheme}://{parts.netloc}".lower()

    def authenticate(self) -> None:
        """Read the credentials from the environment (each scan: rotated tokens are picked up)."""
        token = os.environ.get(self.token_env, "")
        if not token:
            raise ConnectorConfigError(
                f"confluence {self.name!r}: environment variable {self.token_env} is not set "
                "(it holds the "
                + ("API token)" if self.flavor == "cloud" else "personal access token)")
            )
        if self.flavor == "datacenter":
            self.session.auth = _Bearer(token)
            return
        user = os.environ.get(self.username_env or "", "")
        if not user:
            raise ConnectorConfigError(
                f"confluence {self.name!r}: environment variable {self.username_env} is not set "
                "(it holds the Atlassian account e-mail)"
            )
        self.session.auth = HTTPBasicAuth(user, token)

    def get(self, url: str, params: Mapping[str, Any] | None, document: str | None = None) -> Any:
        """The JSON answer to one GET."""
        return self.get_with_response(url, params, document=document)[0]

    def get_with_response(
        self, url: str, params: Mapping[str, Any] | None, *, document: str | None = None
    ) -> tuple[Any, requests.Response]:
        """The JSON answer to one GET, and the response it came in (for its headers)."""
        log.debug("confluence %s: GET %s", self.name, redact(url))
        try:
            return get_json(
                self.session,
                url,
                policy=self.policy,
                params=params,
                source=f"confluence {self.name!r}",
                document=document,
            )
        except ConnectorConfigError as exc:
            variables = f"token in {self.token_env}"
            if self.flavor == "cloud":
                variables = f"user in {self.username_env}, API {variables}"
            raise ConnectorConfigError(f"{exc} ({variables})") from None

    def cursor_pages(
        self, url: str, params: dict[str, Any], document: str | None = None
    ) -> Iterator[list[Any]]:
        """Cloud v2 cursor paging: the ``Link: <...>; rel="next"`` header, else ``_links.next``."""
        seen: set[str] = set()
        next_url: str | None = url
        next_params: dict[str, Any] | None = params
        while next_url is not None:
            data, response = self.get_with_response(next_url, next_params, document=document)
            yield results(data, redact(next_url), document)
            link = response.links.get("next", {}).get("url") or next_link(data)
            if not link:
                return
            next_url, next_params = self._follow(link), None
            if next_url in seen:
                raise _error(document)(
                    f"confluence {self.name!r}: the next-page link repeats ({redact(next_url)})"
                )
            seen.add(next_url)

    def offset_pages(
        self, url: str, params: dict[str, Any], document: str | None = None
    ) -> Iterator[list[Any]]:
        """Data Center start/limit paging: go on while ``_links.next`` is present."""
        start = 0
        while True:
            data = self.get(url, {**params, "start": start, "limit": self.page_size}, document)
            entries = results(data, redact(url), document)
            yield entries
            link = next_link(data)
            if not link:
                return
            if entries:
                size = data.get("size")
                start += size if is_integer(size) and size > 0 else len(entries)
                continue
            # A page that Data Center emptied by permission filtering still links the next:
            # go on where the link says, never take the listing as ended there.
            following = _start_of(link)
            if following is None or following <= start:
                raise _error(document)(
                    f"confluence {self.name!r}: {redact(url)} answered no results at start "
                    f"{start} but links a next page ({redact(link)}) that does not go on"
                )
            start = following

    def _follow(self, link: str) -> str:
        """Resolve a next-page link; never send the credentials to another site."""
        target = urljoin(self._origin + "/", link)
        parts = urlsplit(target)
        if f"{parts.scheme}://{parts.netloc}".lower() != self._origin:
            raise SourceUnavailable(
                f"confluence {self.name!r}: a next-page link points off the site "
                f"({redact(target)}); not followed"
            )
        return target


# -- response shapes -----------------------------------------------------------------------


def _error(document: str | None) -> type[ConnectorError]:
    return DocumentUnreadable if document is not None else SourceUnavailable


def results(data: Any, where: str, document: str | None) -> list[Any]:
    """The ``results`` list of a listing answer; the request's error when it has none."""
    found = data.get("results") if isinstance(data, dict) else None
    if not isinstance(found, list):
        raise _error(document)(f"{where}: the response has no results list")
    return found


def _start_of(link: str) -> int | None:
    """The ``start`` a Data Center next-page link asks for, if it gives one."""
    values = parse_qs(urlsplit(link).query).get("start", [])
    return int(values[0]) if len(values) == 1 and values[0].isdigit() else None


def next_link(data: Any) -> str | None:
    """The answer's ``_links.next``, if any."""
    link = dig(data, "_links", "next")
    return link if isinstance(link, str) and link else None


def dig(data: Any, *keys: str) -> Any:
    """``data[k1][k2]...``, or None where a level is missing or not an object."""
    for key in keys:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def label_names(entries: list[Any]) -> frozenset[str]:
    """The names of a list of label entries, as compared: stripped, lower case."""
    return frozenset(
        e["name"].strip().lower()
        for e in entries
        if isinstance(e, dict) and isinstance(e.get("name"), str)
    )
