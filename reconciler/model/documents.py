"""Documents: a version as the document table holds it, as a system of record declares it
(with what it could not read), and a person's declarations."""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass
from datetime import datetime
from operator import attrgetter
from typing import Any

from reconciler.model.encoding import jsonable
from reconciler.model.states import OPEN_END, VersionState


@dataclass(frozen=True, slots=True)
class Document:
    """One document version: a row of the document table."""

    doc_id: str
    source: str
    source_key: str
    doc_family_id: str
    doc_version: int
    version_state: VersionState
    effective_to: datetime = OPEN_END
    effective_from: datetime | None = None
    superseded_by: str | None = None
    doc_class: str | None = None
    title: str | None = None
    source_hash: str | None = None
    quarantined: bool = False
    quarantine_reason: str | None = None
    ingested_at: datetime | None = None
    updated_at: datetime | None = None
    #: How many chunks the ingestion wrote for this version (0: not known, e.g. a row
    #: registered by a pipeline that does not say). The reference ingestion writes it before
    #: the chunks, so a document with fewer chunks than this lost some (``missing_chunks``).
    chunk_count: int = 0


_FIELDS = tuple(f.name for f in dataclasses.fields(Document))
_VALUES = attrgetter(*_FIELDS)
_PLACE = {name: at for at, name in enumerate(_FIELDS)}


def replaced(doc: Document, /, **changes: Any) -> Document:
    """``dataclasses.replace(doc, **changes)``, made through ``Document``'s own ``__init__``
    with every field given by position, read at once (``attrgetter``): half the time of
    ``replace``, which asks each field's ``init``, reads it by name and passes keywords (the
    time rule and the planner make ~500,000 copies in a declare of 100,000 proposals). A
    subclass, or a name that is not a field, goes through ``replace`` itself (its error)."""
    if type(doc) is not Document:
        return dataclasses.replace(doc, **changes)
    values = list(_VALUES(doc))
    for name, value in changes.items():
        at = _PLACE.get(name)
        if at is None:
            return dataclasses.replace(doc, **changes)
        values[at] = value
    return Document(*values)


#: The fields of a row ``DocumentReader.iter_expected`` gives, in order: the row's identity,
#: then those ``payload.managed_values`` takes (what the check's scan reads of a row; the
#: instants as ``datetime`` values, or on SQLite as the texts stored: ``is_stored_form``).
EXPECTED_FIELDS: tuple[str, ...] = (
    *("doc_id", "source", "source_hash", "chunk_count", "doc_family_id", "doc_version"),
    *("version_state", "superseded_by", "effective_from", "effective_to", "doc_class"),
    *("quarantined", "quarantine_reason"),
)


@dataclass(frozen=True, slots=True)
class SourceDocument:
    """One document version as the system of record declares it (metadata only, no body)."""

    source: str
    source_key: str
    doc_id: str
    content_hash: str
    path: str | None = None
    family: str | None = None
    version: int | None = None
    state: VersionState | None = None
    effective_from: datetime | None = None
    effective_to: datetime | None = None
    #: The successor it declares; with several (``successors``), the first one declared.
    superseded_by: str | None = None
    title: str | None = None
    doc_class: str | None = None
    #: Every successor it declares, forward (``superseded_by``) or reverse (a successor's
    #: ``replaces``), first declared first: a version may be superseded by several (a fan-out).
    #: Empty for a source that declares one at most: ``superseded_by`` alone then.
    successors: tuple[str, ...] = ()

    @property
    def declared_successors(self) -> tuple[str, ...]:
        """Every successor this version declares (``successors``, else ``superseded_by``)."""
        if self.successors:
            return self.successors
        return () if self.superseded_by is None else (self.superseded_by,)


class DeclarationKind(enum.StrEnum):
    """What a person declared: ``doc_id`` superseded by the document ``target``, or in the
    family ``target``."""

    SUPERSEDE = "supersede"
    FAMILY = "family"


@dataclass(frozen=True, slots=True)
class Declaration:
    """A decision a person recorded (``reconciler declare``), read by every run beside the
    systems of record (``rules.declarations``): who (the run's actor is ``declare``), when,
    why, on what (a proposal's evidence, score and id), the run that recorded it and the
    rollback that revoked it."""

    id: str
    kind: DeclarationKind
    doc_id: str
    target: str
    declared_by: str
    declared_at: datetime
    reason: str | None = None
    evidence: str | None = None
    score: float | None = None
    proposal: str | None = None
    run_id: str | None = None
    revoked_at: datetime | None = None
    revoked_by: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The declaration as the audit log and ``--format json`` spell it."""
        return {name: jsonable(getattr(self, name)) for name in self.__dataclass_fields__}


class ProblemKind(enum.StrEnum):
    """Why a source document could not be taken as it is; each becomes a finding later."""

    UNREADABLE = "unreadable"
    UNDECODABLE = "undecodable"
    INVALID_FRONTMATTER = "invalid_frontmatter"
    FRONTMATTER_NOT_MAPPING = "frontmatter_not_mapping"
    INVALID_FIELD = "invalid_field"
    DUPLICATE_ID = "duplicate_id"
    DANGLING_SUPERSEDED_BY = "dangling_superseded_by"
    SELF_SUPERSESSION = "self_supersession"
    SUPERSESSION_CYCLE = "supersession_cycle"
    #: Links a source cannot take as they are (a connector whose successors must be one).
    CONFLICTING_LINKS = "conflicting_links"
    LINK_OUTSIDE_ROOT = "link_outside_root"
    UNUSED_MAPPING = "unused_mapping"  # a mapped key no reader took from any document
    ID_NOT_READ = "id_not_read"  # an ``id`` body pattern missed the id's line: path is id
    #: A document writes a mapped key that no reader took from it, while other documents'
    #: readers did (its block sits where the readers do not look): read as absent.
    KEY_NOT_READ = "key_not_read"
    DECLARATION_CONFLICT = "declaration_conflict"  # a source says otherwise: the source stands
    #: The source names a registered document with a new id: ``reconciler rekey`` applies it.
    REKEY_PENDING = "rekey_pending"
    #: A re-keying that cannot be decided (two old ids at one path, a new id already taken).
    REKEY_AMBIGUOUS = "rekey_ambiguous"


@dataclass(frozen=True, slots=True)
class SourceProblem:
    """A per-document problem found while scanning a source; never a crash of the scan."""

    source: str
    kind: ProblemKind
    message: str
    path: str | None = None
    doc_id: str | None = None
    #: The source-native key when known (a refused note's default id), to match a table row.
    source_key: str | None = None
    #: For ``INVALID_FIELD``: the ``SourceDocument`` field taken as absent (``state``,
    #: ``effective_from``...). A registered document keeps its registered value for it.
    field: str | None = None


@dataclass(frozen=True, slots=True)
class SourceSnapshot:
    """Everything one scan of one system of record saw."""

    source: str
    documents: tuple[SourceDocument, ...]
    problems: tuple[SourceProblem, ...] = ()
    scanned_at: datetime | None = None
    #: False when part of the source could not be read (a page of results failed): the
    #: documents it lacks may still exist, so none of them is taken as deleted.
    complete: bool = True
