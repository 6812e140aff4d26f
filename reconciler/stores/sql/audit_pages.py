"""A page of payload intents in the audit log (``AuditKind.PAYLOAD_PAGE``: one batch's
intents, one entry), for ``stores.audit``: its documents indexed as it is appended (table
``audit_documents``, the same transaction), an entry found by its target through that index
(``about``), and read back as the intent of each of its documents (``parts``), under the page's
``seq`` and hash, so every reader finds a document's intents as it did one entry a document.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from sqlalchemy import Insert, insert, or_, select
from sqlalchemy.orm import Session

from reconciler.model import AuditEntry, AuditKind, documents_of, page_targets
from reconciler.stores.sql.audit_body import DOCUMENTS, LOG
from reconciler.stores.sql.bulk import insert_returning_through_driver, insert_through_driver
from reconciler.stores.sql.schema import AuditRow

PAGE = AuditKind.PAYLOAD_PAGE


def insert_indexed(
    session: Session,
    rows: list[dict[str, Any]],
    entries: Sequence[AuditEntry],
    *,
    as_is: Mapping[str, str],
    core: Callable[[Session, list[dict[str, Any]]], tuple[Insert, list[dict[str, Any]]]],
) -> None:
    """Insert the entries' ``rows`` (``as_is``: the columns bound as they are, see
    ``bulk.insert_through_driver``); a page's documents are indexed by the ``seq`` its entry
    was given. On SQLite through its driver, a statement a row; else ``core``'s statement and
    parameters, one executemany (``RETURNING``, in the order of ``rows``)."""
    pages = [at for at, entry in enumerate(entries) if entry.target_type == PAGE]
    seqs = insert_returning_through_driver(session, LOG, rows, "seq", as_is=as_is)
    if seqs is None:
        statement, parameters = core(session, rows)
        if not pages:
            session.execute(statement, parameters)
            return
        seqs = list(
            session.scalars(
                statement.returning(LOG.c.seq, sort_by_parameter_order=True), parameters
            ).all()
        )
    documents = [
        {"target": target, "seq": seqs[at]}
        for at in pages
        for target in dict.fromkeys(page_targets(entries[at]))  # (a document once a page)
    ]
    if documents and not insert_through_driver(session, DOCUMENTS, documents):
        session.execute(insert(DOCUMENTS), documents)


def about(targets: Sequence[str]) -> Any:
    """The entries about one of ``targets``: by their own target, or a page's documents."""
    return or_(
        AuditRow.target.in_(targets),
        AuditRow.seq.in_(select(DOCUMENTS.c.seq).where(DOCUMENTS.c.target.in_(targets))),
    )


def readable_parts(
    entry: AuditEntry | None, seq: int, problems: list[str], targets: set[str] | None = None
) -> list[AuditEntry | None]:
    """``parts`` of an entry read from the chain; ``[None]`` for one that cannot be read (a
    page that cannot be split is added to ``problems``)."""
    if entry is None:
        return [None]
    try:
        return [*parts(entry, seq, targets)]
    except ValueError as exc:
        problems.append(f"{exc}; altered")
        return [None]


def parts(entry: AuditEntry, seq: int, targets: set[str] | None = None) -> list[AuditEntry]:
    """An entry as its readers take it (``documents_of``): a page's documents, those among
    ``targets`` if given; a page that cannot be split is unreadable (``ValueError``), said
    by its ``seq``."""
    if entry.target_type != PAGE:
        return [entry]
    try:
        found = documents_of(entry)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"entry {seq}: a page of intents that cannot be read ({exc})") from None
    if targets is None:
        return found
    return [part for part in found if part.target in targets]


class IndexWalk:
    """The page index read beside the chain's walk, both in ``seq`` order (memory flat): each
    walked entry's indexed documents are compared with those its hashed body names, so an
    index altered to hide a page from a document's readers (``audit served``, history,
    rollback's later-runs check), or to lay it at another's door, is a problem said by ``seq``.

    Opened after the log's own query (``ChainWalk``), so it sees at least what the walk does;
    rows past the walk's last entry were appended since and are not judged.
    """

    def __init__(self, session: Session, *, batch_size: int) -> None:
        rows = session.execute(
            select(DOCUMENTS.c.seq, DOCUMENTS.c.target)
            .order_by(DOCUMENTS.c.seq)
            .execution_options(yield_per=batch_size)
        )
        self._rows: Iterator[Any] = iter(rows)
        self._next: Any = next(self._rows, None)
        self._strays: list[int] = []

    def check(self, seq: int, entry: AuditEntry | None, problems: list[str]) -> None:
        """Compare the index rows of entry ``seq`` with what ``entry`` names (``None``: an
        entry that cannot be read, a problem already)."""
        indexed: set[str] = set()
        while self._next is not None and self._next[0] <= seq:
            if self._next[0] < seq:
                self._strays.append(self._next[0])
            else:
                indexed.add(self._next[1])
            self._next = next(self._rows, None)
        if entry is None:
            return
        try:
            named = set(page_targets(entry))
        except (KeyError, TypeError, AttributeError):
            return  # (a page that cannot be read: ``readable_parts`` says so)
        if indexed != named:
            lacks, extra = sorted(named - indexed), sorted(indexed - named)
            problems.append(
                f"entry {seq}: its documents' index (audit_documents) "
                + "; ".join(
                    [
                        *([f"lacks {', '.join(lacks[:5])}"] if lacks else []),
                        *([f"adds {', '.join(extra[:5])}"] if extra else []),
                    ]
                )
                + "; altered"
            )

    def finish(self, last_seq: int, problems: list[str]) -> None:
        """The index rows left up to ``last_seq``: for entries the log does not hold."""
        while self._next is not None and self._next[0] <= last_seq:
            self._strays.append(self._next[0])
            self._next = next(self._rows, None)
        if self._strays:
            problems.append(
                f"{len(self._strays)} row(s) of the documents' index (audit_documents) name "
                f"entries the log does not hold (first: entry {self._strays[0]}); altered"
            )
