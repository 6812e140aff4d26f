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
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from connectors.base import ConnectorConfigError, DocumentUnreadable, SourceUnavailable
from connectors.confluence.changes import changed_pages, pages_at, pages_with_ids, read_token
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
from connectors.confluence.probing import newest_change, watched_properties
from connectors.confluence.supersession import resolve
from connectors.httpclient import HttpPolicy, make_session, redact
from connectors.options import config_problems, load
from reconciler.model import ProblemKind, SourceProblem, SourceSnapshot

__all__ = ["ConfluenceSource"]

log = logging.getLogger(__name__)

#: Reads of the successors a partial read names before they are left unresolved.
_ROUNDS = 4


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
        watch_properties: str = "labelled",
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
        #: "all": the probe reads every page's properties, not only a labelled page's
        self.watch_properties = watch_properties
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
        #: page id -> the date of its current version, from the reads since (``changed_at``)
        self._modified: dict[str, datetime] = {}
        #: page id -> (status, version number), from the reads since (``changed_since``)
        self._versions: dict[str, tuple[str, int | None]] = {}
        #: labelled page id (any page's with ``watch_properties = "all"``) -> its properties
        #: (``probing.marks_print``), as the reads since the last scan declared them, and as
        #: the last probe's label search read them
        self._marks: dict[str, str] = {}
        self._probed: Mapping[str, str] | None = None

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
            watch_properties=options.watch_properties,
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

        snapshot, drafts = self._read(pages, problems, scanned_at, complete, failure)
        self._statuses_seen = {d.page.id: d.page.status for d in drafts}
        self._modified, self._versions, self._marks = {}, {}, {}
        self._remember(drafts)
        return snapshot

    def _read(
        self,
        pages: list[Page],
        problems: list[SourceProblem],
        scanned_at: datetime,
        complete: bool,
        failure: str | None,
        *,
        successors: bool = False,
    ) -> tuple[SourceSnapshot, list[Draft]]:
        """The listed pages declared (labels, properties) and resolved into a snapshot;
        ``successors``: the successors they name that were not listed are read too (by id),
        so that a read of some pages resolves their pointers as a scan would."""
        drafts: list[Draft] = []
        unreadable: set[str] = set()
        failure = self._declare(pages, drafts, unreadable, problems, failure)
        asked: set[str] = set()
        for _ in range(_ROUNDS if successors else 0):
            have = {d.page.id for d in drafts} | unreadable | asked
            wanted = {d.successor for d in drafts if d.successor and d.successor not in have}
            if not wanted or failure is not None:
                break
            asked |= wanted
            found = pages_with_ids(self._client, self.spaces, self.cql, wanted, problems)
            more = [page for page in found if page is not None and page.id in wanted]
            failure = self._declare(more, drafts, unreadable, problems, failure)
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
        log.debug(
            "confluence %s: %d document(s), %d problem(s), complete=%s",
            self.name,
            len(documents),
            len(problems),
            complete,
        )
        snapshot = SourceSnapshot(
            source=self.name,
            documents=tuple(documents),
            problems=tuple(problems),
            scanned_at=scanned_at,
            complete=complete,
        )
        return snapshot, drafts

    def _declare(
        self,
        pages: list[Page],
        drafts: list[Draft],
        unreadable: set[str],
        problems: list[SourceProblem],
        failure: str | None,
    ) -> str | None:
        """Declare ``pages`` into ``drafts`` (a page whose requests 404 into ``unreadable``);
        the failure that stopped the read, if any."""
        for page in pages:
            try:
                draft = declare(
                    self._client,
                    page,
                    problems,
                    supersession_label=self.supersession_label,
                    successor_property=self.successor_property,
                    effective_from_property=self.effective_from_property,
                    marked=self.watch_properties == "all",
                )
            except DocumentUnreadable as exc:
                unreadable.add(page.id)
                problems.append(page_problem(self.name, ProblemKind.UNREADABLE, str(exc), page))
                continue
            except SourceUnavailable as exc:
                return f"reading page {page.id} failed: {exc}"
            drafts.append(draft)
        return failure

    def probe(self, token: str | None) -> str | None:
        """The scope's newest modification and page count, in one CQL search, and the pages
        that carry the supersession label with the properties read of a page, in another
        (``probing.newest_change``): ``token`` again while nothing was edited, added, removed,
        labelled, or given another pointer, date or class on a labelled page; None where the
        site does not answer the search."""
        self._client.authenticate()
        found = newest_change(
            self._client,
            self.spaces,
            self.cql,
            self.supersession_label,
            watched_properties(self.successor_property, self.effective_from_property),
            every=self.watch_properties == "all",
        )
        self._probed = found.marks
        return found.token

    # -- what serve's watch reads (connectors/confluence/changes.py) -------------------------

    def changed_since(self, before: str | None, now: str | None) -> SourceSnapshot | None:
        """The pages changed since the probe's token ``before``, the probe now answering
        ``now``: those the last-modified search lists (``changes.changed_pages``), and the
        labelled pages whose properties the probe read otherwise than the last read declared
        them (``_remarked``), declared as a scan declares them, with the successors they name.
        None where that cannot be told (no scan read yet, a token not the probe's, the
        label moved, the scope's page count not the one read plus the pages new to it: a
        page trashed, deleted or moved; the search failing): the caller reads the whole."""
        was, is_ = read_token(before), read_token(now)
        if not self._statuses_seen or was is None or is_ is None or was.newest is None:
            return None
        if was.labels != is_.labels:  # (the label put on or taken off: no modification says which)
            log.info("confluence %s: the supersession label moved: reading the whole", self.name)
            return None
        pointed = self._remarked() if was.marks != is_.marks else set()
        if pointed is None:
            return None
        at = self._clock()
        self._client.authenticate()
        problems: list[SourceProblem] = []
        try:
            found = changed_pages(self._client, self.spaces, self.cql, was.newest, problems, now=at)
            pages = self._changed(found, is_.total)
            if pages is None:
                return None
            listed = {page.id for page in pages}
            more = pages_with_ids(self._client, self.spaces, self.cql, pointed - listed, problems)
            pages += [page for page in more if page is not None]
            snapshot, drafts = self._read(pages, problems, at, True, None, successors=True)
        except (DocumentUnreadable, SourceUnavailable) as exc:
            log.info("confluence %s: the changed pages cannot be read: %s", self.name, exc)
            return None
        self._remember(drafts)
        return snapshot

    def _remarked(self) -> set[str] | None:
        """The labelled pages (any page, ``watch_properties = "all"``) whose properties the
        last probe read otherwise than the reads since the last scan declared them (a
        successor, a date or a class set, changed or removed with no edit); None where the
        probe read none."""
        if self._probed is None:
            return None
        pointed = {page for page, mark in self._probed.items() if self._marks.get(page) != mark}
        log.info("confluence %s: %d page(s) declare otherwise", self.name, len(pointed))
        return pointed

    def _changed(self, found: list[Page | None], total: int | None) -> list[Page] | None:
        """The listed pages not read at their version yet; None where the scope's count says
        a page went (or an entry could be any page)."""
        pages = [page for page in found if page is not None]
        current = {key for key, status in self._statuses_seen.items() if status == "current"}
        new = {page.id for page in pages if page.status == "current"} - current
        if len(pages) < len(found) or total != len(current) + len(new):
            log.info(
                "confluence %s: %s pages in scope, %d read and %d new: reading the whole",
                self.name,
                total,
                len(current),
                len(new),
            )
            return None
        # (listed again by the overlap, or the watermark's own page: nothing new to read)
        return [p for p in pages if self._versions.get(p.id) != (p.status, p.version)]

    def scan_paths(self, paths: Collection[str]) -> SourceSnapshot:
        """The pages at ``paths`` (``SPACE/…/title``, as a scan names them), found by their
        titles (``changes.pages_at``); where one of them finds no page now, the scope is
        read whole and kept to ``paths`` (a page is never gone for a search's sake)."""
        wanted = set(paths)
        at = self._clock()
        self._client.authenticate()
        problems: list[SourceProblem] = []
        try:
            pages = pages_at(
                self._client, self.spaces, self.cql, wanted, problems, statuses=self.statuses
            )
        except DocumentUnreadable:  # (no such search on this site)
            pages = None
        if pages is None:
            whole = self.scan()
            return dataclasses.replace(
                whole,
                documents=tuple(d for d in whole.documents if d.path in wanted),
                problems=tuple(p for p in whole.problems if p.path is None or p.path in wanted),
            )
        snapshot, drafts = self._read(pages, problems, at, True, None)
        self._remember(drafts)
        return snapshot

    def changed_at(self, source_key: str) -> datetime | None:
        """When the page's current version was made, as the last read saw it (the watch dates
        a change so); None for a page it has not read."""
        return self._modified.get(source_key)

    def _remember(self, drafts: list[Draft]) -> None:
        for draft in drafts:
            if draft.mark is not None:
                self._marks[draft.page.id] = draft.mark
            else:
                self._marks.pop(draft.page.id, None)
        self._statuses_seen.update({d.page.id: d.page.status for d in drafts})
        self._versions.update({d.page.id: (d.page.status, d.page.version) for d in drafts})
        self._modified.update({d.page.id: d.page.version_at for d in drafts if d.page.version_at})

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
