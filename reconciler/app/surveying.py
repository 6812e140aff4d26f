"""A dry read of the configured sources: what the configuration reads of each before anything
is served (``reconciler vocabulary check``), and the refusal of ``ingest`` on a fresh
deployment whose configuration reads nothing of a field it maps.

A new corpus configured by hand fails quietly: a header block the reader does not find makes
every document ``unknown``, and ``unknown`` is served. This reads each source as a run would
(its connector's scan, nothing written), counts per mapped field the documents that gave it,
and derives the state each document's row would take, so that a configuration is mended
before its first ingestion rather than after a week of wrong answers.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from connectors.vocabulary import Note, Vocabulary
from connectors.vocabulary.survey import field_counts, readings, unread_fields
from reconciler.app.wiring import build_sources
from reconciler.errors import ConfigError, VocabularyUnread
from reconciler.model import ProblemKind, SourceDocument, SourceSnapshot, VersionState
from reconciler.ports import DocumentTable
from reconciler.ports.source import SourceUnavailable, SystemOfRecord
from reconciler.rules.declared_state import family_rows, ordinals_by_family
from reconciler.rules.identity import resolve_families
from reconciler.rules.storable import screen
from reconciler.settings import Settings

__all__ = ["SourceSurvey", "refuse_unread", "survey_source", "survey_sources"]


@runtime_checkable
class _ReadsNotes(Protocol):
    """A file source (vault, git): its vocabulary, and the notes its last scan took."""

    vocabulary: Vocabulary
    keep_notes: bool
    last_notes: tuple[Note, ...]


@dataclass(frozen=True, slots=True)
class SourceSurvey:
    """What one source's configuration reads: the verdict and the report."""

    source: str
    #: Mapped fields no document gave (link fields only when a document writes the key).
    unread: tuple[str, ...]
    #: More than half of the documents would be ``unknown`` (and served).
    mostly_unknown: bool
    report: Mapping[str, Any]
    #: The source as it was read (screened), for an ingestion to take rather than read again.
    snapshot: SourceSnapshot | None = None
    #: Documents that write a mapped key no reader took from them (others' readers did).
    keys_not_read: int = 0


def survey_sources(
    settings: Settings,
    *,
    names: list[str] | None = None,
    sample: int = 5,
    now: datetime | None = None,
) -> list[SourceSurvey]:
    """Read each configured source (or those named) and say what its configuration reads."""
    unknown = sorted(set(names or []) - {s.name for s in settings.sources})
    if unknown:
        raise ConfigError([("sources", f"no source named {n!r}") for n in unknown])
    return [
        survey_source(
            source,
            sample=sample,
            now=now or datetime.now(UTC),
            unknown_siblings=settings.policy.unknown_siblings,
        )
        for source in build_sources(settings, names)
    ]


def survey_source(
    source: SystemOfRecord, *, sample: int, now: datetime, unknown_siblings: str = "supersede"
) -> SourceSurvey:
    """One source read dry (raises ``SourceUnavailable`` when it cannot be read)."""
    notes_kept = isinstance(source, _ReadsNotes)
    if isinstance(source, _ReadsNotes):
        source.keep_notes = True
    try:
        snapshot = screen(source.scan())
    finally:
        if isinstance(source, _ReadsNotes):
            source.keep_notes = False
    states = _states(snapshot, now=now, unknown_siblings=unknown_siblings)
    total = len(snapshot.documents)
    counted = Counter(state.value for state in states.values())
    unused = {p.field: p.message for p in snapshot.problems if p.kind is ProblemKind.UNUSED_MAPPING}
    report: dict[str, Any] = {
        "source": source.name,
        "documents": total,
        "states": {state.value: counted.get(state.value, 0) for state in VersionState},
        "problems": dict(Counter(str(p.kind) for p in snapshot.problems)),
        "unread_keys": [{"field": f, "message": m} for f, m in sorted(unused.items()) if f],
        "id_not_read": [
            {"path": p.path, "message": p.message}
            for p in snapshot.problems
            if p.kind is ProblemKind.ID_NOT_READ
        ][:sample],
    }
    # Every other problem of the read (a note not taken, a link that names nothing...),
    # by path: a count alone leaves a person to guess which document went missing.
    said = {ProblemKind.UNUSED_MAPPING, ProblemKind.ID_NOT_READ, ProblemKind.KEY_NOT_READ}
    report["problems_first"] = [
        {"kind": str(p.kind), "path": p.path or p.doc_id, "message": p.message}
        for p in snapshot.problems
        if p.kind not in said
    ][: max(sample, 10)]
    not_read = [p for p in snapshot.problems if p.kind is ProblemKind.KEY_NOT_READ]
    report["key_not_read"] = {
        "documents": len({p.path for p in not_read}),
        "first": [
            {"path": p.path, "field": p.field, "message": p.message}
            for p in not_read[: max(sample, 10)]
        ],
    }
    unread: list[str] = []
    if notes_kept and isinstance(source, _ReadsNotes):
        notes = sorted(source.last_notes, key=lambda n: n.path)
        source.last_notes = ()
        counts = field_counts(source.vocabulary, notes)
        unread = unread_fields(counts, (f for f in unused if f))
        by_path = {d.path: d for d in snapshot.documents}
        report["readers"] = list(source.vocabulary.readers)
        report["fields"] = [count.to_json() for count in counts]
        report["sample"] = [
            {
                "path": note.path,
                "doc_id": by_path[note.path].doc_id if note.path in by_path else None,
                "state": _state_of(states, by_path.get(note.path)),
                "read": readings(note),
            }
            for note in _spread(notes, sample)
        ]
    mostly_unknown = total > 0 and counted.get(VersionState.UNKNOWN.value, 0) * 2 > total
    report["unread"] = unread
    report["mostly_unknown"] = mostly_unknown
    return SourceSurvey(
        source.name,
        tuple(unread),
        mostly_unknown,
        report,
        snapshot,
        keys_not_read=report["key_not_read"]["documents"],
    )


def refuse_unread(
    sources: list[SystemOfRecord], table: DocumentTable, settings: Settings
) -> dict[str, SourceSnapshot]:
    """Raise ``VocabularyUnread`` for the first source none of whose documents is registered
    (a fresh deployment) whose configuration reads nothing of a field it maps. Otherwise the
    snapshots read (screened), by source name, which the ingestion then takes rather than
    read each source twice (the source keeps what its scan read: a vault its paths, git its
    blob ids)."""
    read: dict[str, SourceSnapshot] = {}
    for source in sources:
        known_by_key, _ = table.identities(source.name)
        if known_by_key:
            continue
        try:
            survey = survey_source(
                source,
                sample=0,
                now=datetime.now(UTC),
                unknown_siblings=settings.policy.unknown_siblings,
            )
        except SourceUnavailable:
            continue  # the ingestion reports it as unavailable
        if survey.unread:
            raise VocabularyUnread(source.name, list(survey.unread))
        if survey.snapshot is not None:
            read[source.name] = survey.snapshot
    return read


def _states(
    snapshot: SourceSnapshot, *, now: datetime, unknown_siblings: str
) -> dict[str, VersionState]:
    """doc id -> the state its row would take on a fresh deployment (ingestion's rule)."""
    if not snapshot.documents:
        return {}
    assignment = resolve_families(snapshot.documents, known_by_key={}, known_by_hash={})
    rows = family_rows(
        snapshot.documents,
        family_of=assignment.family_of,
        as_of=now,
        registered={},
        version_of=ordinals_by_family(snapshot.documents, assignment.family_of),
        unknown_siblings=unknown_siblings,
    )
    return {doc_id: row.version_state for doc_id, row in rows.items()}


def _state_of(states: dict[str, VersionState], doc: SourceDocument | None) -> str | None:
    state = states.get(doc.doc_id) if doc is not None else None
    return state.value if state is not None else None


def _spread(notes: list[Note], count: int) -> list[Note]:
    """``count`` notes spread evenly over ``notes`` (all of them when fewer)."""
    if count <= 0 or not notes:
        return []
    if len(notes) <= count:
        return notes
    step = len(notes) / count
    return [notes[int(i * step)] for i in range(count)]
