"""``reconciler audit served`` and ``audit history``: what the default filter admitted at an
instant, and each version's history, answered from the audit log alone.

Two passes over the log (``reconciler.trail``): the first walks the whole chain, verifying
it (a chain that fails verification answers nothing), and finds the documents the scope asks
about; the second reads only their entries and those of their runs, and replays them. The
chunk index is not opened: the answer is the log's, and says what it rests on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

from reconciler.app.wiring import open_table
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.errors import AuditUnanswerable, NotFound
from reconciler.filters import filter_terms
from reconciler.model import AuditKind, rfc3339, utc
from reconciler.ports import TableReader
from reconciler.ports.table import ChainedEntry
from reconciler.settings import Settings
from reconciler.trail.answers import history_of, served_at
from reconciler.trail.replay import WHY_TEXT, Replay
from reconciler.trail.survey import Survey

#: Problems of a chain named in the refusal (``audit verify`` lists them all).
SHOWN_PROBLEMS = 5


def admits(payload: Mapping[str, Any], as_of: datetime) -> bool:
    """Whether ``default_filter(as_of=as_of)`` admits a chunk holding ``payload`` (its
    managed keys, logical names: as the log records them)."""
    return filter_terms(as_of).admits(payload)


def read_trail(
    table: TableReader, *, families: Iterable[str], docs: Iterable[str]
) -> tuple[Survey, Replay]:
    """Walk and verify the whole chain, then replay the entries of the documents the scope
    asks about (see the module docstring). ``AuditUnanswerable`` when the chain fails
    verification or is empty; ``NotFound`` when the log holds nothing about the scope."""
    survey, upto = _walked(table, families=families, docs=docs)
    if not survey.asked:
        raise _nothing_about(survey, docs)
    return survey, _replayed(table, survey.asked | survey.runs, upto=upto)


def _walked(
    table: TableReader, *, families: Iterable[str] = (), docs: Iterable[str] = ()
) -> tuple[Survey, int]:
    """The whole chain walked and verified: the survey of it, and its last ``seq``."""
    survey = Survey(families=frozenset(families), docs=frozenset(docs))
    walk = table.walk_audit()
    for chained in walk:
        survey.see(chained)
    if not walk.verification.ok:
        problems = walk.verification.problems
        raise AuditUnanswerable(
            f"the audit log fails verification ({len(problems)} problem(s)), so it cannot say "
            "what was served: "
            + "; ".join(problems[:SHOWN_PROBLEMS])
            + ("; …" if len(problems) > SHOWN_PROBLEMS else "")
            + " (`reconciler audit verify` lists them all)"
        )
    if not survey.entries:
        raise AuditUnanswerable("the audit log is empty: nothing has been written yet")
    return survey, walk.last_seq


def _nothing_about(survey: Survey, docs: Iterable[str]) -> NotFound:
    named = [*(f"family {f!r}" for f in sorted(survey.families)), *map(repr, sorted(docs))]
    older = (
        f"; {survey.ingests_without_payload} ingestion entr(ies) of an older version did "
        "not record payloads, so the families of the documents they wrote are not in the "
        "log: name such documents with --doc"
        if survey.ingests_without_payload and survey.families
        else ""
    )
    near = f"; the log names {', '.join(map(repr, sorted(survey.near)))}" if survey.near else ""
    return NotFound(
        f"the audit log has no entry about {' or '.join(named)}{near}: the reconciler never "
        "wrote a payload there (a family or document id is as the payloads spell it, "
        "`reconciler audit show --doc DOC` shows a document's; chunks written only by "
        "another pipeline are not in the log)" + older
    )


def _replayed(table: TableReader, docs: Iterable[str], *, upto: int) -> Replay:
    """The entries of ``docs`` (and how their runs' intents ended), up to ``upto``, replayed."""
    about = sorted(table.audit_entries_about(docs, upto=upto), key=lambda c: c.seq)
    entries = sorted([*about, *ends_of(table, about, upto=upto)], key=lambda c: c.seq)
    altered = [c.seq for c in entries if c.entry is None]
    if altered:
        raise AuditUnanswerable(
            f"audit entries {', '.join(map(str, altered[:10]))} no longer match their hash "
            "(altered since the chain was walked a moment ago): run `reconciler audit verify`"
        )
    return Replay().feed_all(entries)


def ends_of(table: TableReader, about: list[ChainedEntry], *, upto: int) -> list[ChainedEntry]:
    """How the intents among ``about`` ended: for each, the first confirmation of its run
    after it (it confirms every intent of the run before it), and the run's resolutions.
    A run's entries are streamed from its first intent here, and no further than its last
    one's confirmation: what is kept follows the intents, not the run's length."""
    open_seqs: dict[str, list[int]] = {}
    for chained in about:
        if chained.entry is not None and chained.entry.target_type in (
            AuditKind.PAYLOAD,
            AuditKind.INGEST,
        ):
            open_seqs.setdefault(chained.entry.run_id, []).append(chained.seq)
    found: list[ChainedEntry] = []
    for run_id, seqs in open_seqs.items():
        left = sorted(seqs)
        for chained in table.audit_entries_about([run_id], upto=upto, after=left[0]):
            kind = chained.entry.target_type if chained.entry is not None else None
            if kind == AuditKind.RESOLVE or chained.entry is None:
                found.append(chained)  # (an altered one is refused by the caller)
            elif kind == AuditKind.CONFIRM and left[0] < chained.seq:
                found.append(chained)
                left = [seq for seq in left if seq > chained.seq]
                if not left:
                    break
    return found


def _trail(settings: Settings, families: list[str], docs: list[str]) -> tuple[Survey, Replay]:
    table = open_table(settings)
    try:
        return read_trail(table, families=families, docs=docs)
    finally:
        table.close()


def audit_served(
    settings: Settings,
    *,
    at: datetime | None,
    families: Iterable[str] = (),
    docs: Iterable[str] = (),
    clock: Clock = SYSTEM_CLOCK,
) -> dict[str, Any]:
    """What each chunk of the families (documents) held at ``at`` (``None``: now) by the
    audit log, and so what ``default_filter(as_of=at)`` admitted then."""
    at = utc(at) if at is not None else clock.now()
    families, docs = sorted(set(families)), sorted(set(docs))
    survey, replay = _trail(settings, families, docs)
    assert survey.first_at is not None
    assert survey.last_at is not None
    if at < survey.first_at:
        raise AuditUnanswerable(
            f"{rfc3339(at)} is before the audit log begins ({rfc3339(survey.first_at)}): the "
            "log cannot say what was served then"
        )
    named = survey.linked(docs)  # (a document asked under one id answers under any it had)
    documents = served_at(replay, at=at, families=set(families), docs=named, admits=admits)
    return {
        "at": rfc3339(at),
        "scope": {"families": families, "docs": docs},
        "log": {**survey.log_json(), "replayed": replay.entries},
        "served": [d["doc_id"] for d in documents if d["served"] in ("yes", "partly")],
        "undetermined": [d["doc_id"] for d in documents if d["served"] == "undetermined"],
        "documents": documents,
        "basis": basis(survey, at=at, undetermined=_undetermined(documents)),
    }


#: Documents answered at a time by the whole-corpus form (what is held at once).
CORPUS_BATCH = 500


class CorpusAnswer:
    """``audit served --at T --all``: every document the log wrote a payload of, answered a
    batch at a time (``CORPUS_BATCH`` documents: their entries and their runs' ends, replayed,
    answered, dropped), so memory follows the batch, not the corpus or the log. Read ``head``,
    iterate ``documents()`` once (the table is closed when it ends), then ``tail()``: the
    summary (documents by whether they were served, chunks by status) and what it rests on."""

    def __init__(self, settings: Settings, *, at: datetime | None, clock: Clock) -> None:
        self.at = utc(at) if at is not None else clock.now()
        self._table = open_table(settings)
        try:
            self._survey, self._upto = _walked(self._table)
        except BaseException:
            self._table.close()
            raise
        assert self._survey.first_at is not None
        if self.at < self._survey.first_at:
            self._table.close()
            raise AuditUnanswerable(
                f"{rfc3339(self.at)} is before the audit log begins "
                f"({rfc3339(self._survey.first_at)}): the log cannot say what was served then"
            )
        self.served: Counter[str] = Counter()
        self.chunks: Counter[str] = Counter()
        self._undetermined: Counter[str] = Counter()
        self._replayed = 0
        #: Ids of renamed documents answered already (a re-keying's old and new ids are
        #: replayed together, in the batch of whichever comes first).
        self._done: set[str] = set()

    @property
    def head(self) -> dict[str, Any]:
        """What the answer is about, before its documents."""
        return {"at": rfc3339(self.at), "scope": {"all": True}}

    def documents(self) -> Iterator[dict[str, Any]]:
        """Each document's answer (as ``audit served`` gives it), in doc id order."""
        try:
            batch: list[str] = []
            kinds = (AuditKind.PAYLOAD, AuditKind.INGEST)
            for doc_id in self._table.audit_targets(kinds=kinds, upto=self._upto):
                batch.append(doc_id)
                if len(batch) == CORPUS_BATCH:
                    yield from self._answered(batch)
                    batch = []
            if batch:
                yield from self._answered(batch)
        finally:
            self._table.close()

    def _answered(self, docs: list[str]) -> Iterator[dict[str, Any]]:
        linked = self._survey.linked(docs)
        fresh = {doc for doc in linked if doc not in self._done}
        self._done |= {doc for doc in linked if doc in self._survey.renamed}
        replay = _replayed(self._table, linked | self._survey.rekeys, upto=self._upto)
        self._replayed += replay.entries
        answered = served_at(replay, at=self.at, families=set(), docs=fresh, admits=admits)
        for document in answered:
            self.served[document["served"]] += 1
            for variant in document["variants"]:
                self.chunks[variant["status"]] += len(variant["points"])
            self._undetermined.update(_undetermined([document]))
            yield document

    def tail(self) -> dict[str, Any]:
        """The summary and the basis, once the documents are read."""
        return {
            "log": {**self._survey.log_json(), "replayed": self._replayed},
            "summary": {
                "documents": sum(self.served.values()),
                "served": dict(sorted(self.served.items())),
                "chunks": dict(sorted(self.chunks.items())),
            },
            "basis": basis(self._survey, at=self.at, undetermined=self._undetermined),
        }


def audit_served_corpus(
    settings: Settings, *, at: datetime | None, clock: Clock = SYSTEM_CLOCK
) -> CorpusAnswer:
    """``audit served`` for the whole corpus, streamed (``CorpusAnswer``)."""
    return CorpusAnswer(settings, at=at, clock=clock)


def audit_history(
    settings: Settings,
    *,
    families: Iterable[str] = (),
    docs: Iterable[str] = (),
    clock: Clock = SYSTEM_CLOCK,
) -> dict[str, Any]:
    """Each version's periods over the log (what its chunks held, from when to when, who
    changed it) and when the default filter admitted it, until now."""
    families, docs = sorted(set(families)), sorted(set(docs))
    survey, replay = _trail(settings, families, docs)
    until = clock.now()
    documents = history_of(
        replay, families=set(families), docs=survey.linked(docs), admits=admits, until=until
    )
    return {
        "until": rfc3339(until),
        "scope": {"families": families, "docs": docs},
        "log": {**survey.log_json(), "replayed": replay.entries},
        "documents": documents,
        "basis": basis(survey, at=None, undetermined=Counter()),
    }


def _undetermined(documents: list[dict[str, Any]]) -> Counter[str]:
    """Points whose admission the log cannot tell, by why."""
    found: Counter[str] = Counter()
    for document in documents:
        for variant in document["variants"]:
            if variant["admitted"] is None:
                found[variant["why"]] += len(variant["points"])
    return found


def basis(survey: Survey, *, at: datetime | None, undetermined: Counter[str]) -> list[str]:
    """What an answer rests on, in sentences."""
    assert survey.first_at is not None
    assert survey.last_at is not None
    said = [
        f"the audit log's {survey.entries} entries were verified (hash chain intact), from "
        f"{rfc3339(survey.first_at)} to {rfc3339(survey.last_at)}; the chunk index was not "
        "read",
        "a chunk's payload is what the log recorded: each write's intent (the payload it "
        "found, the payload it wrote), its confirmation, a killed run's resolution, and, for "
        "a chunk an ingestion wrote, the payload the ingestion recorded; a point is known by "
        "its id, whichever collection holds it",
        "writes by anything other than the reconciler are not in the log: it notices one only "
        "when a later write of its own finds a point changed ('outside'), and chunks it never "
        "wrote are not in the answer",
    ]
    if at is not None and at > survey.last_at:
        said.append(
            f"{rfc3339(at)} is after the log's last entry: the payloads are those standing "
            "then, and the filter judges their windows at the instant asked"
        )
    for why, count in sorted(undetermined.items()):
        said.append(f"{count} point(s) undetermined: {WHY_TEXT.get(why, why)}")
    if survey.ingests_without_payload:
        said.append(
            f"{survey.ingests_without_payload} ingestion entr(ies) of an older version did not "
            "record the payload they wrote: those chunks are unknown until a later entry read "
            "them, and a document no later entry wrote is found by --doc only (its family is "
            "not in the log)"
        )
    if survey.out_of_order:
        said.append(
            f"{survey.out_of_order} entr(ies) are stamped more than a minute before an entry "
            "ahead of them (older versions stamped a `--now` run's entries with its as-of "
            "instant): each entry is taken at its stamp"
        )
    if survey.unknown_types:
        kinds = ", ".join(f"{k} ({n})" for k, n in sorted(survey.unknown_types.items()))
        said.append(f"entries of kinds this version does not read were skipped: {kinds}")
    return said
