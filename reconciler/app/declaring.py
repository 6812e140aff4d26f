"""``reconciler declare``: the library function behind it. Turns a person's decisions (a
reviewed proposals file of ``suggest``, or one ``--supersede OLD --by NEW`` / ``--family F
DOC...``) into declarations, checks them against the table, and records them in a run of their
own: a ``declare`` run, scoped to the families they touch, planned, guarded (weighed against
the whole corpus), audited and undone by ``rollback`` like any other writing run
(``--dry-run``: a ``plan`` run, nothing recorded).

What the engine does with declarations is ``reconciler.rules.declarations``'s (a system of
record's own declaration wins; a disagreement is ``family/declaration_conflict``).
"""

from __future__ import annotations

import dataclasses
import getpass
import logging
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

from reconciler.app.operations import engine_options, reconcile
from reconciler.app.wiring import open_table
from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.discovery import Proposal, Proposals, ProposalsError, load_reviewed
from reconciler.discovery.lookalikes import shown, skeleton, unusual
from reconciler.discovery.proposals import DIRECTED
from reconciler.errors import Undeclarable
from reconciler.model import Declaration, DeclarationKind
from reconciler.pipeline.values import Report
from reconciler.ports import DocumentReader
from reconciler.ports.table import DeclarationReader
from reconciler.settings import Settings

log = logging.getLogger(__name__)

#: The run's actor (the person is ``declared_by``).
ACTOR = "declare"
#: Longest family id a document row holds.
FAMILY_ID_MAX = 512


class _Table(DocumentReader, DeclarationReader, Protocol):
    """What ``declare`` reads of the table before its run."""


@dataclass(frozen=True)
class Decision:
    """One decision before it is a declaration: what, about which documents, and on what."""

    kind: DeclarationKind
    doc_id: str
    target: str
    reason: str | None = None
    evidence: str | None = None
    score: float | None = None
    proposal: str | None = None


@dataclass(frozen=True)
class Declared:
    """What ``declare`` recorded (or, dry, would record), and the run that did it."""

    #: The run (``None`` when there was nothing new to declare: no run was made).
    report: Report | None
    declarations: tuple[Declaration, ...]
    #: Decisions left out, and why (already declared; a proposal not accepted).
    skipped: tuple[str, ...] = ()
    dry_run: bool = False

    def to_json(self) -> dict[str, Any]:
        """The declarations part of the command's JSON."""
        return {
            "dry_run": self.dry_run,
            "declarations": [d.to_json() for d in self.declarations],
            "skipped": list(self.skipped),
        }


def from_file(path: Path) -> tuple[list[Decision], list[str]]:
    """The accepted proposals of the reviewed file at ``path`` (read as a file nobody vouches
    for: ``reconciler.discovery.reviewed``) as decisions, and what was left out.
    ``Undeclarable`` lists every problem of the file, each with its line."""
    try:
        proposals = load_reviewed(path)
    except ProposalsError as exc:
        raise Undeclarable([f"{path}: {p}" for p in exc.problems]) from None
    return from_proposals(proposals)


def from_proposals(proposals: Proposals) -> tuple[list[Decision], list[str]]:
    """The accepted proposals of a reviewed ``suggest`` file as decisions, and what was left
    out: undecided and rejected proposals (counted). ``Undeclarable`` lists every accepted
    proposal that cannot be taken (a link with no direction)."""
    decisions: list[Decision] = []
    problems: list[str] = []
    left = {"undecided": 0, "reject": 0}
    for proposal in proposals.proposals:
        if proposal.decision != "accept":
            left[proposal.decision] += 1
            continue
        if proposal.kind == "link":
            if proposal.direction != DIRECTED:
                problems.append(
                    f"{proposal.id}: accepted with no direction; set older and newer, and "
                    f"direction: {DIRECTED}"
                )
                continue
            assert proposal.older is not None  # (read_proposals checked both)
            decisions.append(_decision(DeclarationKind.SUPERSEDE, proposal.older, proposal))
        else:
            decisions += _family_members(proposal)
    if problems:
        raise Undeclarable(problems)
    skipped = [f"{n} proposal(s) {what}" for what, n in left.items() if n]
    return decisions, skipped


def _decision(kind: DeclarationKind, doc_id: str, proposal: Proposal) -> Decision:
    return Decision(
        kind=kind,
        doc_id=doc_id,
        target=(proposal.newer or "") if kind is DeclarationKind.SUPERSEDE else "",
        reason=f"accepted proposal {proposal.id}",
        evidence=proposal.evidence,
        score=proposal.score,
        proposal=proposal.id,
    )


def _family_members(proposal: Proposal) -> list[Decision]:
    """An accepted family proposal: every member in one family, named when the table is read
    (``family_for``; the target is left empty until then)."""
    return [_decision(DeclarationKind.FAMILY, member, proposal) for member in proposal.members]


def family_for(members: Sequence[str], rows: Mapping[str, str]) -> str:
    """The family an accepted family proposal gathers its members in: the one that already
    holds the most of them (ties: the first member's, oldest first), so the fewest move.
    ``rows``: doc_id -> the family its row is in."""
    held: dict[str, int] = {}
    for member in members:
        if member in rows:
            family = rows[member]
            held[family] = held.get(family, 0) + 1
    if not held:
        return members[0]
    order = {family: n for n, family in enumerate(dict.fromkeys(held))}
    return min(held, key=lambda f: (-held[f], order[f]))


def decisions_to_declarations(
    decisions: Sequence[Decision],
    table: _Table,
    *,
    declared_by: str,
    reason: str | None,
    at: datetime,
    run_id: str | None = None,
) -> tuple[list[Declaration], list[str], dict[str, str]]:
    """Decisions checked against the table and made declarations (ids, who, when, and the
    ``run_id`` of the run that will record them), those already declared (left out), and the
    family of each document they name (doc_id -> its row's family: the run reads the rows
    themselves, with their families'; building them here too was 4.5 % of a declare of
    100,000 proposals). ``Undeclarable`` lists every problem at once: a document
    the table does not hold, a document superseded by itself, a family id that cannot be
    stored, a decision an active declaration contradicts."""
    named = sorted(
        {d.doc_id for d in decisions}
        | {d.target for d in decisions if d.kind is DeclarationKind.SUPERSEDE}
    )
    rows: dict[str, str] = {}
    for start in range(0, len(named), 500):
        rows.update(table.families_of(named[start : start + 500]))
    problems = _unknown(table, [doc_id for doc_id in named if doc_id not in rows])
    by_proposal: dict[str, list[str]] = {}
    for d in decisions:
        if d.kind is DeclarationKind.FAMILY and not d.target and d.proposal:
            by_proposal.setdefault(d.proposal, []).append(d.doc_id)
    active = table.declarations(active=True)
    links = {(a.doc_id, a.target): a for a in active if a.kind is DeclarationKind.SUPERSEDE}
    families = {a.doc_id: a for a in active if a.kind is DeclarationKind.FAMILY}
    made: list[Declaration] = []
    skipped: list[str] = []
    seen: set[tuple[str, str, str]] = set()
    for d in decisions:
        target = d.target
        if d.kind is DeclarationKind.FAMILY and not target and d.proposal:
            target = family_for(by_proposal[d.proposal], rows)
        key = (str(d.kind), d.doc_id, target)
        if key in seen:
            continue
        seen.add(key)
        what = f"{d.kind} {d.doc_id} -> {target}"
        if d.kind is DeclarationKind.SUPERSEDE:
            if d.doc_id == target:
                problems.append(f"{what}: a document cannot supersede itself")
                continue
            if (d.doc_id, target) in links:
                skipped.append(f"{what}: already declared ({links[(d.doc_id, target)].id})")
                continue
            if (target, d.doc_id) in links:
                problems.append(
                    f"{what}: declaration {links[(target, d.doc_id)].id} says the reverse "
                    "(roll back the run that recorded it first)"
                )
                continue
        else:
            if not target.strip() or len(target) > FAMILY_ID_MAX:
                problems.append(f"{what}: a family id is 1 to {FAMILY_ID_MAX} characters")
                continue
            earlier = families.get(d.doc_id)
            if earlier is not None and earlier.target == target:
                skipped.append(f"{what}: already declared ({earlier.id})")
                continue
            if earlier is not None:
                problems.append(
                    f"{what}: declaration {earlier.id} places it in {earlier.target!r} "
                    "(roll back the run that recorded it first)"
                )
                continue
        made.append(
            Declaration(
                id=f"d-{uuid.uuid4().hex[:12]}",
                kind=d.kind,
                doc_id=d.doc_id,
                target=target,
                declared_by=declared_by,
                declared_at=at,
                reason=reason or d.reason,
                evidence=d.evidence,
                score=d.score,
                proposal=d.proposal,
                run_id=run_id,
            )
        )
    problems += contradictions(made)
    if problems:
        raise Undeclarable(problems)
    return made, skipped, rows


def _unknown(table: _Table, missing: Sequence[str]) -> list[str]:
    """A problem for each id the table does not hold: the bare id the table holds when one
    was written ``<source>:<id>`` (a row adopted by ``bootstrap`` keeps the collection's own
    id), else its unusual characters named and the real id it imitates (``lookalikes``)."""
    imitated = {doc_id: skeleton(doc_id) for doc_id in missing}
    bare = {doc_id: doc_id.split(":", 1)[1] for doc_id in missing if ":" in doc_id}
    asked = sorted({s for doc_id, s in imitated.items() if s != doc_id} | set(bare.values()))
    real: set[str] = set()
    for start in range(0, len(asked), 500):
        real.update(table.get_documents(asked[start : start + 500]))
    problems = []
    for doc_id in missing:
        problem = (
            f"no document {shown(doc_id)} in the table (doc ids are '<source>:<id>'; "
            "`reconciler status` and `reconciler suggest` show them)"
        )
        odd = unusual(doc_id)
        if bare.get(doc_id) in real:
            problem += (
                f"; did you mean {shown(bare[doc_id])}? A row adopted by `reconciler "
                "bootstrap` keeps the collection's own id, with no '<source>:' prefix"
            )
        elif imitated[doc_id] in real:
            problem += (
                f"; it looks like {shown(imitated[doc_id])}, which the table holds, but has "
                + ", ".join(odd)
            )
        elif odd:
            problem += "; note its unusual character(s): " + ", ".join(odd)
        problems.append(problem)
    return problems


def contradictions(made: Sequence[Declaration]) -> list[str]:
    """What the declarations of one file (or one command) say against each other: a document
    placed in two families, superseded by two documents, or superseded in a cycle (``a`` by
    ``b`` by ... by ``a``). Any one refuses the whole file."""
    problems = []
    for kind, what in (
        (DeclarationKind.FAMILY, "into two or more families"),
        (DeclarationKind.SUPERSEDE, "superseded by two or more documents"),
    ):
        targets: dict[str, list[Declaration]] = {}
        for d in made:
            if d.kind is kind:
                targets.setdefault(d.doc_id, []).append(d)
        for doc_id, those in targets.items():
            if len(those) > 1:
                problems.append(
                    f"{doc_id} is declared {what} at once: "
                    + "; ".join(f"{shown(d.target)}{_from(d)}" for d in those)
                )
    successor = {d.doc_id: d.target for d in made if d.kind is DeclarationKind.SUPERSEDE}
    reported: set[str] = set()
    for start in successor:
        path, at = [start], successor.get(start)
        while (
            at is not None and at not in path and at not in reported and len(path) <= len(successor)
        ):
            path.append(at)
            at = successor.get(at)
        if at is not None and at in path and at not in reported:
            cycle = path[path.index(at) :]
            reported.update(cycle)
            problems.append("the declarations supersede in a cycle: " + " -> ".join([*cycle, at]))
    return problems


def _from(d: Declaration) -> str:
    return f" (proposal {d.proposal})" if d.proposal else ""


def declare(
    settings: Settings,
    decisions: Sequence[Decision],
    *,
    declared_by: str | None = None,
    reason: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    skipped: Iterable[str] = (),
    clock: Clock = SYSTEM_CLOCK,
) -> Declared:
    """Record ``decisions`` as declarations and reconcile the families they touch, in one
    ``declare`` run (``dry_run``: a ``plan`` run that shows the writes; nothing recorded)."""
    who = declared_by or default_declarer()
    at = clock.now()
    # (the run's id chosen here, so each declaration is made with it once: the run records
    # them as they are, and they are what this returns when it is not refused)
    run_id = None if dry_run else str(uuid.uuid4())
    table = open_table(settings)
    try:
        made, already, rows = decisions_to_declarations(
            decisions, table, declared_by=who, reason=reason, at=at, run_id=run_id
        )
    finally:
        table.close()
    left = [*skipped, *already]
    if not made:  # (declaring a reviewed file again records nothing new: no run)
        return Declared(report=None, declarations=(), skipped=tuple(left), dry_run=dry_run)
    named = {d.doc_id for d in made} | {
        d.target for d in made if d.kind is DeclarationKind.SUPERSEDE
    }
    families = {rows[doc_id] for doc_id in named} | {
        d.target for d in made if d.kind is DeclarationKind.FAMILY
    }
    options = engine_options(
        settings,
        mode="plan" if dry_run else "declare",
        force=force,
        actor=ACTOR,
        families=sorted(families),
    )
    options = dataclasses.replace(options, declarations=tuple(made), run_id=run_id)
    report = reconcile(settings, options, clock=clock)
    log.info(
        "%s %d declaration(s) by %s%s",
        "planned" if dry_run else ("refused" if report.refused else "recorded"),
        len(made),
        who,
        f" in run {report.run_id}" if not dry_run else "",
    )
    # (a recorded run's declarations were made with its id: ``report.run_id`` is ``run_id``)
    recorded: tuple[Declaration, ...] = () if report.refused else tuple(made)
    return Declared(report=report, declarations=recorded, skipped=tuple(left), dry_run=dry_run)


def default_declarer() -> str:
    """Who declares when ``--who`` is not given: the login name."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a container)
        return "unknown"


def list_declarations(settings: Settings, *, active: bool = True) -> list[Declaration]:
    """The declarations recorded (``active``: only those not revoked), oldest first."""
    table = open_table(settings)
    try:
        return table.declarations(active=active)
    finally:
        table.close()
