"""What the audit log says each chunk point held, and from when: the log replayed, entry by
entry in chain order, into one timeline a point (``Timeline``: consecutive ``Span``s).

Which entries change what a point holds, and when:

- a payload intent (``payload``: the points, their exact managed payload before, the payload
  written) is committed *before* its batch is sent; its confirmation (``confirm``, committed
  with the next batch or at the end) says the batch was written. Between the two the point
  held one of the two payloads (``in doubt``: the write was under way); from the confirmation
  on, the payload written. A confirmation that lists ``written`` points (a batch that failed)
  confirms only those; the others never changed;
- a killed run's unconfirmed intents are settled by the next runner's ``resolve`` entry:
  ``written`` points changed at some instant between the intent and the resolution (in doubt
  all that while: the log does not know when the process died), ``not_written`` ones never
  did. An intent never confirmed nor resolved stays in doubt to the end of the log;
- an ingestion intent (``ingest``) replaces every point of the document: the old ones are
  deleted, the new ones carry the row's payload. Entries written since the ingestion recorded
  them name the new points and their payload; older ones do not, and the points they wrote
  hold a payload the log cannot tell (``unknown``) until a later entry reads them. An
  interrupted ingestion's document that was queued again (``requeued``) is unknown from its
  intent on;
- before the first entry about a point, the log cannot say what it held (``unknown``, with the
  payload the entry found as a hint), unless a registering ingestion created it (then there
  was no point);
- a payload intent whose ``before`` is not what the log last had for the point means the point
  was changed by something other than the reconciler: from the log's last word to that intent
  it held one or the other (in doubt);
- a re-keying (``rekey``: its intent, ``rekey_row``: a document renamed in the table) keeps
  the points and changes the document they answer under: up to the ``rekey_row`` entry a
  point belongs to the old id, from it to the new one (``Timeline.names``; ``owned_spans``
  gives the spans of one id, the others ``renamed``). The intent's points whose
  ``superseded_by`` named an old id hold the new one from its confirmation (in doubt since
  the intent), like a payload intent's.

The timeline is keyed by point id (its text): where a point is kept (which collection) does
not enter into it. Pure: entries in, timelines out; memory is the timelines of the documents
replayed and the intents still open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from reconciler.model import MANAGED_KEYS, AuditEntry, AuditKind
from reconciler.payload import chunk_id_for, point_id_for, same_payload
from reconciler.ports.table import ChainedEntry

#: A managed payload, hashable: the values of ``MANAGED_KEYS`` in order (``None``: absent).
Payload = tuple[Any, ...]

#: Where ``doc_family_id`` and ``superseded_by`` are in a ``Payload``.
FAMILY = MANAGED_KEYS.index("doc_family_id")
SUCCESSOR = MANAGED_KEYS.index("superseded_by")

#: What a point held, as far as the log can tell.
PAYLOAD, ABSENT, UNKNOWN = "payload", "absent", "unknown"

#: Why a span holds what it holds (``Span.why``).
WHY_TEXT: dict[str, str] = {
    "ingested": "written by an ingestion",
    "written": "written by a run",
    "read": "what an audited write found on it (that write did not happen)",
    "writing": "a write was under way (audited, not yet confirmed)",
    "unresolved": "a write was audited and never confirmed nor resolved (the run's shard has "
    "not run since)",
    "outside": "changed by something other than the reconciler, at an instant the log "
    "does not know",
    "before_history": "before the log's first entry about this point",
    "not_created": "no point yet (an ingestion created it later)",
    "deleted": "deleted by a re-ingestion of its document",
    "legacy_ingest": "written by an ingestion whose entry did not record payloads "
    "(before this version)",
    "interrupted_ingest": "an interrupted ingestion left its document incomplete",
    "renamed": "its document had another id then (a re-keying renamed it)",
}


def payload_of(mapping: Mapping[str, Any]) -> Payload:
    """A managed payload (a mapping of logical keys) as a ``Payload``."""
    return tuple(_frozen(mapping.get(key)) for key in MANAGED_KEYS)


def payload_dict(payload: Payload) -> dict[str, Any]:
    """A ``Payload`` as a mapping of the managed keys (absent keys as ``None``)."""
    return {key: _thawed(value) for key, value in zip(MANAGED_KEYS, payload, strict=True)}


def _frozen(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return ("__list__", *(_frozen(v) for v in value))
    if isinstance(value, dict):
        return ("__dict__", *sorted((str(k), _frozen(v)) for k, v in value.items()))
    return value


def _thawed(value: Any) -> Any:
    if isinstance(value, tuple) and value and value[0] == "__list__":
        return [_thawed(v) for v in value[1:]]
    if isinstance(value, tuple) and value and value[0] == "__dict__":
        return {k: _thawed(v) for k, v in value[1:]}
    return value


@dataclass(frozen=True)
class Held:
    """One thing a point may have held: a payload, no point at all, or what the log cannot
    tell."""

    kind: str
    payload: Payload | None = None


NO_POINT = Held(ABSENT)
NOT_KNOWN = Held(UNKNOWN)


@dataclass(frozen=True)
class Cause:
    """The audit entry a span comes from: which run, who, why, and where in the chain."""

    seq: int
    at: datetime
    run_id: str
    actor: str
    reason: str | None


@dataclass
class Span:
    """What a point held from ``start`` (``None``: from the beginning) until the next span's
    start: one ``Held``, or two when the log cannot tell which (in doubt)."""

    start: datetime | None
    held: tuple[Held, ...]
    why: str
    cause: Cause | None = None
    #: For a point before its history: what the log's first entry about it found.
    hint: Payload | None = None

    @property
    def status(self) -> str:
        """``known``, ``absent``, ``unknown`` or ``in_doubt``."""
        if len(self.held) > 1:
            return "in_doubt"
        kind = self.held[0].kind
        return "known" if kind == PAYLOAD else kind


@dataclass
class Timeline:
    """One point's spans, oldest first, and the document it belongs to."""

    point_id: Any
    doc_id: str
    spans: list[Span] = field(default_factory=list)
    #: The renames of its document, in order: from each instant on, the point answers under
    #: that id (before the first: ``doc_id``).
    names: list[tuple[datetime, str, Cause]] = field(default_factory=list)

    @property
    def doc_now(self) -> str:
        """The id the point answers under at the end of the log read so far."""
        return self.names[-1][1] if self.names else self.doc_id


def owned_spans(timeline: Timeline, doc_id: str) -> list[Span]:
    """The point's spans as document ``doc_id``'s: while another id held it (a re-keying),
    one ``renamed`` span of no point."""
    if not timeline.names:
        return timeline.spans
    owners: list[tuple[datetime | None, str, Cause | None]] = [
        (None, timeline.doc_id, timeline.names[0][2]),
        *timeline.names,
    ]
    out: list[Span] = []
    for n, (start, owner, cause) in enumerate(owners):
        end = owners[n + 1][0] if n + 1 < len(owners) else None
        if owner != doc_id:
            out.append(Span(start, (NO_POINT,), "renamed", cause))
            continue
        inside = [
            s
            for s in timeline.spans
            if (start is None or (s.start is not None and s.start > start))
            and (end is None or s.start is None or s.start < end)
        ]
        if start is not None:
            before = [s for s in timeline.spans if s.start is None or s.start <= start]
            if before:
                out.append(replace(before[-1], start=start, cause=cause))  # (its rename)
        out += inside
    return out


@dataclass
class _Open:
    """An intent not yet confirmed nor resolved: per point, the span it opened, what the point
    held before and what the write leaves."""

    seq: int
    entry_hash: str
    kind: str
    doc_id: str
    cause: Cause
    changes: dict[str, tuple[Span, Span, Held, str]] = field(default_factory=dict)


def key_of(point_id: Any) -> str:
    """A point id as text (the log stores ids as JSON: a UUID string or an integer)."""
    return str(point_id)


class Replay:
    """The log replayed for some documents: feed it their entries and those of their runs
    (confirmations, resolutions), in chain order; ``finish`` when the log ends."""

    def __init__(self) -> None:
        self.timelines: dict[str, Timeline] = {}
        #: doc id -> its points' keys, in the order first met.
        self.points_of: dict[str, dict[str, None]] = {}
        #: doc id -> every family a payload of it named (for points whose payload is unknown).
        self.families_of: dict[str, set[str]] = {}
        #: run id -> its open intents, oldest first.
        self._open: dict[str, list[_Open]] = {}
        #: Documents whose every point the log knows (an ingestion that recorded its points
        #: registered or replaced them all): a point of theirs first met in a later
        #: ingestion did not exist before it.
        self._all_points_known: set[str] = set()
        #: Entries read.
        self.entries = 0

    def feed(self, chained: ChainedEntry) -> None:
        """Replay one entry (``chained.entry`` is read; an unreadable entry is the caller's
        to refuse)."""
        entry = chained.entry
        if entry is None:
            raise ValueError(f"audit entry {chained.seq} cannot be read")
        self.entries += 1
        if entry.target_type == AuditKind.PAYLOAD:
            self._payload_intent(chained, entry)
        elif entry.target_type == AuditKind.INGEST:
            self._ingest_intent(chained, entry)
        elif entry.target_type == AuditKind.CONFIRM:
            self._confirm(chained, entry)
        elif entry.target_type == AuditKind.RESOLVE:
            self._resolve(entry)
        elif entry.target_type == AuditKind.REKEY:
            self._rekey_intent(chained, entry)
        elif entry.target_type == AuditKind.REKEY_ROW:
            self._renamed(chained, entry)

    def feed_all(self, entries: Iterable[ChainedEntry]) -> Replay:
        """Replay every entry, then ``finish``; returns this replay."""
        for chained in entries:
            self.feed(chained)
        self.finish()
        return self

    def finish(self) -> None:
        """The log ends here: an intent still open stays in doubt, unresolved."""
        for opened in self._open.values():
            for change in opened:
                for span, _prior, _after, _why in change.changes.values():
                    span.why = "unresolved"
        self._open.clear()

    # -- intents ---------------------------------------------------------------------------

    def _timeline(self, point_id: Any, doc_id: str) -> Timeline:
        key = key_of(point_id)
        timeline = self.timelines.get(key)
        if timeline is None:
            timeline = self.timelines[key] = Timeline(point_id, doc_id)
            self.points_of.setdefault(doc_id, {})[key] = None
        return timeline

    def _note_family(self, doc_id: str, payload: Payload | None) -> None:
        family = None if payload is None else payload[FAMILY]
        if family is not None:
            self.families_of.setdefault(doc_id, set()).add(str(family))

    def _open_intent(self, chained: ChainedEntry, entry: AuditEntry, kind: str) -> _Open:
        cause = Cause(chained.seq, entry.at, entry.run_id, entry.actor, entry.reason)
        opened = _Open(chained.seq, chained.entry_hash, kind, entry.target, cause)
        self._open.setdefault(entry.run_id, []).append(opened)
        return opened

    def _payload_intent(self, chained: ChainedEntry, entry: AuditEntry) -> None:
        before_map = dict(entry.before.get("payload") or {})
        written = dict(entry.after.get("payload") or {})
        before = payload_of(before_map)
        after = payload_of({**before_map, **written})  # (a partial write keeps the others)
        self._note_family(entry.target, before)
        self._note_family(entry.target, after)
        opened = self._open_intent(chained, entry, AuditKind.PAYLOAD)
        for point_id in entry.before.get("points") or []:
            timeline = self._timeline(point_id, entry.target)
            held = self._read_before(timeline, before, opened.cause)
            prior = Span(None, (held,), "read", opened.cause)
            span = Span(entry.at, _either(held, Held(PAYLOAD, after)), "writing", opened.cause)
            timeline.spans.append(span)
            opened.changes[key_of(point_id)] = (span, prior, Held(PAYLOAD, after), "written")

    def _read_before(self, timeline: Timeline, before: Payload, cause: Cause) -> Held:
        """What an intent found on a point, set against what the log last had for it: the
        first word on a point opens its history; a disagreement is a change made outside."""
        if not timeline.spans:
            timeline.spans.append(Span(None, (NOT_KNOWN,), "before_history", cause, before))
            return Held(PAYLOAD, before)
        last = timeline.spans[-1]
        if last.status == "known":
            had = last.held[0].payload
            assert had is not None
            if same_payload(payload_dict(had), payload_dict(before)):
                return last.held[0]  # (its own spelling, which the write found)
            last.held, last.why = (last.held[0], Held(PAYLOAD, before)), "outside"
        elif last.status == "absent":
            last.held, last.why = (NO_POINT, Held(PAYLOAD, before)), "outside"
        return Held(PAYLOAD, before)

    def _ingest_intent(self, chained: ChainedEntry, entry: AuditEntry) -> None:
        doc_id, after = entry.target, entry.after or {}
        opened = self._open_intent(chained, entry, AuditKind.INGEST)
        recorded = "payload" in after and "points" in after
        if recorded:
            new_held = Held(PAYLOAD, payload_of(after["payload"]))
            self._note_family(doc_id, new_held.payload)
            new_points = list(after["points"])
            why = "ingested"
        else:  # an entry written before ingestions recorded their payloads
            new_held = NOT_KNOWN
            chunks = int(after.get("chunks") or 0)
            new_points = [point_id_for(chunk_id_for(doc_id, n)) for n in range(chunks)]
            why = "legacy_ingest"
        new_keys = {key_of(p) for p in new_points}
        old = [
            k
            for k in self.points_of.get(doc_id, {})
            if k not in new_keys and self.timelines[k].doc_now == doc_id
        ]
        registering = entry.before is None  # a new document: its points did not exist
        for key in old:
            self._ingest_change(opened, self.timelines[key], NO_POINT, "deleted", entry)
        # a re-ingestion of a document whose points the log knows creates the new ones: they
        # did not exist before it (absent then), not "before the log's history" (unknown)
        created = registering or doc_id in self._all_points_known
        for point_id in new_points:
            timeline = self._timeline(point_id, doc_id)
            if not timeline.spans:
                start = "not_created" if created else "before_history"
                timeline.spans.append(
                    Span(None, (NO_POINT if created else NOT_KNOWN,), start, opened.cause)
                )
            self._ingest_change(opened, timeline, new_held, why, entry)
        if recorded:
            self._all_points_known.add(doc_id)
        else:
            self._all_points_known.discard(doc_id)

    def _ingest_change(
        self, opened: _Open, timeline: Timeline, after: Held, why: str, entry: AuditEntry
    ) -> None:
        prior = timeline.spans[-1]
        held = (NOT_KNOWN,) if after.kind == UNKNOWN else _either(*prior.held, after)
        span = Span(entry.at, held, "writing", opened.cause)
        timeline.spans.append(span)
        opened.changes[key_of(timeline.point_id)] = (span, prior, after, why)

    def _rekey_intent(self, chained: ChainedEntry, entry: AuditEntry) -> None:
        """A re-keying's intent: the points whose ``superseded_by`` names an old id take the
        new one (the renames themselves are its ``rekey_row`` entries)."""
        renamed = {
            p["old_id"]: p["new_id"] for p in (entry.after or {}).get("pairs", []) if "old_id" in p
        }
        opened = self._open_intent(chained, entry, AuditKind.REKEY)
        for points in ((entry.before or {}).get("points") or {}).values():
            for point_id, _chunk, successor in points:
                timeline = self.timelines.get(key_of(point_id))
                if successor not in renamed or timeline is None or not timeline.spans:
                    continue
                last = timeline.spans[-1]
                if last.status != "known" or last.held[0].payload is None:
                    continue
                had = last.held[0].payload
                after = Held(PAYLOAD, (*had[:SUCCESSOR], renamed[successor], *had[SUCCESSOR + 1 :]))
                span = Span(entry.at, _either(last.held[0], after), "writing", opened.cause)
                timeline.spans.append(span)
                opened.changes[key_of(point_id)] = (span, last, after, "written")

    def _renamed(self, chained: ChainedEntry, entry: AuditEntry) -> None:
        """A document renamed in the table (``rekey_row``): its points answer under the new id
        from this entry on."""
        old, new = (entry.before or {}).get("doc_id"), entry.target
        if not isinstance(old, str):
            return
        cause = Cause(chained.seq, entry.at, entry.run_id, entry.actor, entry.reason)
        for key in list(self.points_of.get(old, {})):
            timeline = self.timelines[key]
            if timeline.doc_now == old:
                timeline.names.append((entry.at, new, cause))
                self.points_of.setdefault(new, {})[key] = None
        self.families_of.setdefault(new, set()).update(self.families_of.get(old, set()))
        if old in self._all_points_known:
            self._all_points_known.add(new)

    # -- how intents end -------------------------------------------------------------------

    def _confirm(self, chained: ChainedEntry, entry: AuditEntry) -> None:
        opened = self._open.get(entry.run_id)
        if not opened or not isinstance(entry.after, dict):
            return
        through = entry.after.get("through")
        upto = next((o.seq for o in opened if o.entry_hash == through), chained.seq)
        done = [o for o in opened if o.seq <= upto]
        self._open[entry.run_id] = [o for o in opened if o.seq > upto]
        written = entry.after.get("written")
        only = None if written is None else {key_of(p) for p in written}
        for change in done:
            for key, (span, prior, after, why) in change.changes.items():
                if only is None or key in only:
                    self._settle(key, span, after, why, entry.at, change.cause)
                else:
                    _revert(span, prior)

    def _resolve(self, entry: AuditEntry) -> None:
        """A killed run's open intents, settled by the next runner: payload intents by the
        points written or not, ingestion intents by the documents complete or queued again
        (a document in neither had not been written at all)."""
        after = entry.after if isinstance(entry.after, dict) else {}
        payloads = "written" in after or "not_written" in after
        kind = AuditKind.PAYLOAD if payloads else AuditKind.INGEST
        written = {key_of(p) for p in after.get("written") or []}
        not_written = {key_of(p) for p in after.get("not_written") or []}
        complete, requeued = set(after.get("complete") or []), set(after.get("requeued") or [])
        left = []
        for change in self._open.get(entry.run_id, []):
            if change.kind != kind:
                left.append(change)
                continue
            for key, (span, prior, held, why) in change.changes.items():
                done = key in written if payloads else change.doc_id in complete
                if done:
                    self._settle(key, span, held, why, entry.at, change.cause)
                elif (key in not_written) if payloads else (change.doc_id not in requeued):
                    _revert(span, prior)
                elif payloads:
                    span.why = "unresolved"
                else:
                    span.held, span.why = (NOT_KNOWN,), "interrupted_ingest"
        self._open[entry.run_id] = left

    def _settle(
        self, key: str, span: Span, held: Held, why: str, at: datetime, cause: Cause
    ) -> None:
        """The write of ``span`` happened before ``at``: from then on the point holds ``held``."""
        if len(span.held) == 1:  # nothing was in doubt (an unknown, or the same payload)
            span.held, span.why = (held,), why
            return
        # (an entry stamped before the intent, by another machine's clock: at the intent)
        start = at if span.start is None else max(at, span.start)
        self.timelines[key].spans.append(Span(start, (held,), why, cause))


def _either(*held: Held) -> tuple[Held, ...]:
    """The things a point may have held, each once, in order."""
    return tuple(dict.fromkeys(held))


def _revert(span: Span, prior: Span) -> None:
    """The write of ``span`` never happened: it holds what the point held before."""
    span.held, span.why, span.hint = prior.held, prior.why, prior.hint
