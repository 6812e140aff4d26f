"""The Confluence connector itself, ``ConfluenceSource``: a scan lists the pages in scope
(``pages``), reads what each declares (``declaration``) and resolves successors across the
scan (``supersession``); ``read_body`` fetches one page's storage-format body.

Failures are never read as deletions (connectors/base.py): a listing request that fails once
nothing is read raises ``SourceUnavailable``; one that fails later ends the scan with the pages
read so far, ``complete=False`` and an ``UNREADABLE`` problem naming what failed; a page whose
own request (properties, labels) answers 404 is that page's ``UNREADABLE`` problem and the scan
goes on.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.confluence.client import ConfluenceClient
from connectors.confluence.declaration import Draft, declare
from connectors.confluence.options import DEFAULT_STATUSES, FLAVORS, ConfluenceSettings
from connectors.confluence.pages import (
    PAGE_ID,
    Page,
    Partial,
    list_pages,
    page_problem,
    storage_body,
)
from connectors.confluence.probing import newest_change
from connectors.confluence.supersession import resolve
from connectors.httpclient import HttpPolicy, make_session, redact
from connectors.options import config_problems, load
from reconciler.model import ProblemKind, SourceProblem, SourceSnapshot

__all__ = ["ConfluenceSource"]

log = logging.getLogger(__name__)


class ConfluenceSource:
    """Confluence pages (Cloud REST v2 or Data Center REST v1), one document per page."""

    def __init__(
        self,
        name: str,
        url: str,
        *,
        flavor: str,
        token_env: str,
        username_env: str | None = None,
        spaces: Sequence[str] = (),
        cql: str | None = None,
        supersession_label: str = "superseded",
        successor_property: str = "superseded_by",
        effective_from_property: str = "effective_from",
        statuses: Sequence[str] | None = None,
        page_size: int = 50,
        policy: HttpPolicy | None = None,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        if flavor not in FLAVORS:
            raise ConnectorConfigError(f"confluence {name!r}: flavor must be cloud or datacenter")
        self.name = name
        self.flavor = flavor
        self.token_env = token_env
        self.username_env = username_env
        self.spaces = tuple(spaces)
        self.cql = cql
        self.supersession_label = supersession_label.strip().lower()
        self.successor_property = successor_property
        self.effective_from_property = effective_from_property
        self.statuses = tuple(statuses) if statuses else DEFAULT_STATUSES[flavor]
        self.page_size = page_size
        self.policy = policy or HttpPolicy()
        self._clock = clock or (lambda: datetime.now(UTC))
        self._session = make_session(self.policy)
        self._client = ConfluenceClient(
            name,
            url,
            flavor=flavor,
            token_env=token_env,
            username_env=username_env,
            page_size=page_size,
            policy=self.policy,
            session=self._session,
        )
        self._statuses_seen: dict[str, str] = {}  # page id -> status, from the last scan

    def __repr__(self) -> str:
        return (
            f"ConfluenceSource(name={self.name!r}, flavor={self.flavor!r}, "
            f"url={redact(self._client.site)!r}, token_env={self.token_env!r})"
        )

    def close(self) -> None:
        """Release the HTTP session's connections."""
        self._session.close()

    # -- configuration ---------------------------------------------------------------------

    @classmethod
    def config_problems(cls, settings: Any) -> list[tuple[str, str]]:
        """What is wrong with a confluence source's settings (checked when the config loads)."""
        return config_problems(ConfluenceSettings, settings)

    @classmethod
    def from_settings(cls, settings: Any) -> ConfluenceSource:
        """Build from a ``[[sources]]`` entry (type "confluence")."""
        config = load(ConfluenceSettings, settings)
        options = config.options
        policy = HttpPolicy.from_options(options.policy_options())
        if options.backoff_jitter is not None:
            policy = dataclasses.replace(policy, backoff_jitter=options.backoff_jitter)
        return cls(
            settings.name,
            config.url,
            flavor=options.flavor,
            token_env=options.token_env,
            username_env=options.username_env,
            spaces=options.spaces,
            cql=options.cql,
            supersession_label=options.supersession_label,
            successor_property=options.successor_property,
            effective_from_property=options.effective_from_property,
            statuses=options.statuses,
            page_size=options.page_size,
            policy=policy,
        )

    # -- the SystemOfRecord contract -------------------------------------------------------

    def scan(self) -> SourceSnapshot:
        """List every page in scope with its properties; partial scans say so."""
        scanned_at = self._clock()
        self._client.authenticate()
        problems: list[SourceProblem] = []
        pages: list[Page] = []
        failure: str | None = None
        complete = True
        try:
            seen: set[str] = set()
            for page in list_pages(
                self._client,
                spaces=self.spaces,
                cql=self.cql,
                statuses=self.statuses,
                problems=problems,
            ):
                if page is None:  # an entry without an id: it could be any page
                    complete = False
                elif page.id not in seen:  # offset paging may repeat an entry; keep the first
                    seen.add(page.id)
                    pages.append(page)
        except Partial as exc:
            failure = exc.message

        drafts: list[Draft] = []
        unreadable: set[str] = set()
        for page in pages:
            try:
                draft = declare(
                    self._client,
                    page,
                    problems,
                    supersession_label=self.supersession_label,
                    successor_property=self.successor_property,
                    effective_from_property=self.effective_from_property,
                )
            except DocumentUnreadable as exc:
                unreadable.add(page.id)
                problems.append(page_problem(self.name, ProblemKind.UNREADABLE, str(exc), page))
                continue
            except SourceUnavailable as exc:
                failure = f"reading page {page.id} failed: {exc}"
                break
            drafts.append(draft)

        if failure is not None:
            complete = False
            if not drafts:
                raise SourceUnavailable(failure)
            log.warning(
                "confluence %s: partial scan (%d page(s) read): %s",
                self.name,
                len(drafts),
                failure,
            )
            problems.append(
                SourceProblem(
                    source=self.name,
                    kind=ProblemKind.UNREADABLE,
                    message=f"partial scan, absent pages are not taken as deleted: {failure}",
                    path=redact(self._client.api),
                )
            )
        documents = resolve(
            self.name,
            self.successor_property,
            drafts,
            problems,
            complete=complete,
            unreadable=unreadable,
        )
        self._statuses_seen = {d.page.id: d.page.status for d in drafts}
        log.debug(
            "confluence %s: %d document(s), %d problem(s), complete=%s",
            self.name,
            len(documents),
            len(problems),
            complete,
        )
        return SourceSnapshot(
            source=self.name,
            documents=tuple(documents),
            problems=tuple(problems),
            scanned_at=scanned_at,
            complete=complete,
        )

    def probe(self, token: str | None) -> str | None:
        """The scope's newest modification and page count, in one CQL search
        (``probing.newest_change``): ``token`` again while nothing was edited, added or
        removed; None where the site does not answer the search."""
        self._client.authenticate()
        return newest_change(self._client, self.spaces, self.cql)

    def read_body(self, source_key: str) -> str:
        """The page's storage-format body (XHTML), as hashed by the scan."""
        if not PAGE_ID.fullmatch(source_key):
            raise DocumentUnreadable(
                f"confluence {self.name!r}: {source_key!r} is not a Confluence page id"
            )
        self._client.authenticate()
        if self.flavor == "cloud":
            url = f"{self._client.api}/pages/{source_key}"
            params: dict[str, Any] = {"body-format": "storage"}
        else:
            url = f"{self._client.api}/content/{source_key}"
            params = {
                "expand": "body.storage",
                "status": self._statuses_seen.get(source_key, "current"),
            }
        try:
            data = self._client.get(url, params, document=f"page {source_key}")
        except SourceUnavailable as exc:
            raise DocumentUnreadable(str(exc)) from None
        body = storage_body(data)
        if body is None:
            raise DocumentUnreadable(
                f"confluence {self.name!r}: page {source_key} has no storage-format body"
            )
        return body
