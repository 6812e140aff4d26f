"""Membership as plain data: a row registered under another family than its view's is
``family/membership_changed`` and its repair moves row and payload; rows regrouped by the
family the sources give them; ``hash/id_reused`` when a registered text is under another id."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.check_inputs import CheckContext, ChunkAggregate, FamilyView, SourceState
from reconciler.checks.family import check_family, declared_family
from reconciler.checks.hash import check_hash
from reconciler.model import Document, Severity, SourceDocument, VersionState
from reconciler.pipeline import membership
from reconciler.pipeline.values import SourcesRead
from reconciler.planning import plan_family

NOW = datetime(2025, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)
OLD, NEW = "kb:policy-2014", "kb:policy-2024"


def row(key: str, family: str, start: int, *, content: str | None = None) -> Document:
    return Document(
        doc_id=f"kb:{key}",
        source="kb",
        source_key=key,
        doc_family_id=family,
        doc_version=1,
        version_state=VersionState.CURRENT,
        effective_from=NOW - start * DAY,
        source_hash=f"sha256:{content or key}",
        ingested_at=NOW - 30 * DAY,
    )


def src(
    key: str, start: int, *, successor: str | None = None, content: str | None = None
) -> SourceDocument:
    return SourceDocument(
        source="kb",
        source_key=key,
        doc_id=f"kb:{key}",
        content_hash=f"sha256:{content or key}",
        state=VersionState.SUPERSEDED if successor else VersionState.CURRENT,
        effective_from=NOW - start * DAY,
        superseded_by=f"kb:{successor}" if successor else None,
    )


def ctx(readable: bool = True, holders: dict[str, tuple[str, ...]] | None = None) -> CheckContext:
    state = SourceState("kb", readable=readable, scanned=True, last_success_at=NOW)
    return CheckContext(now=NOW, sources={"kb": state}, holders=holders or {})


def merged_view() -> FamilyView:
    """policy-2024 registered on its own, now linked from policy-2014: checked in its family."""
    rows = (row("policy-2014", OLD, 300), row("policy-2024", NEW, 10))
    sources = {
        "kb:policy-2014": src("policy-2014", 300, successor="policy-2024"),
        "kb:policy-2024": src("policy-2024", 10),
    }
    return FamilyView(
        family=OLD,
        rows=rows,
        sources=sources,
        successors={"kb:policy-2024": sources["kb:policy-2024"]},
        registered=frozenset({"kb:policy-2024"}),
        chunks={"kb:policy-2024": ChunkAggregate(count=3, matching=3)},
    )


def test_a_row_of_another_family_is_moved_and_settled_with_its_new_family() -> None:
    view = merged_view()
    findings = check_family(view, ctx())
    by_kind = {(f.kind, f.doc_id): f for f in findings}
    moved = by_kind["membership_changed", "kb:policy-2024"]
    assert moved.severity is Severity.WARNING
    assert moved.family == OLD
    assert moved.changes == {"doc_family_id": OLD}
    assert moved.expected == {"doc_family_id": OLD, "because": "it is linked to kb:policy-2014"}
    assert ("successor_not_marked", "kb:policy-2014") in by_kind
    plan = plan_family(view, findings, declared_family(view, ctx()).rows)
    updates = {u.doc_id: u for u in plan.row_updates}
    assert updates["kb:policy-2024"].fields() == {"doc_family_id": (NEW, OLD)}
    assert updates["kb:policy-2014"].after.version_state is VersionState.SUPERSEDED
    [target] = [t for t in plan.payload_targets if t.doc_id == "kb:policy-2024"]
    assert target.payload["doc_family_id"] == OLD
    assert target.points == 3
    assert {t.family for t in plan.payload_targets} | {u.family for u in plan.row_updates} == {
        OLD,
        NEW,
    }


def test_an_unread_source_moves_nothing() -> None:
    findings = check_family(merged_view(), ctx(readable=False))
    assert not [f for f in findings if f.kind == "membership_changed"]


def sources_read(family_of: dict[str, str]) -> SourcesRead:
    return SourcesRead(
        states={},
        by_id={},
        family_of=family_of,
        problems={},
        loose_problems=(),
        last_seen={},
        identities={},
        present={},
    )


def test_rows_are_regrouped_by_the_family_the_sources_give_them() -> None:
    rows = [row("a", "kb:a", 3), row("b", "kb:b", 2), row("c", "kb:c", 1), row("d", "kb:d", 1)]
    read = sources_read({"kb:a": "kb:a", "kb:b": "kb:a", "kb:c": "kb:x"})  # d: not read
    moved = membership.moves(rows, read)
    assert moved == {"kb:b": "kb:a", "kb:c": "kb:x"}
    grouped = membership.regroup(rows, moved, lambda family: family != "kb:x")
    assert {f: [r.doc_id for r in rs] for f, rs in grouped.items()} == {
        "kb:a": ["kb:a", "kb:b"],
        "kb:d": ["kb:d"],
    }  # c moves to a family this run does not cover: left to the run that does


def test_a_registered_text_under_another_id_is_id_reused() -> None:
    registered = row("pep-0837", "kb:pep-0837", 30, content="old")
    view = FamilyView(
        family="kb:pep-0837",
        rows=(registered,),
        sources={"kb:pep-0837": src("pep-0837", 30, content="new")},
    )
    holders = {"sha256:old": ("kb:pep-0840",), "sha256:new": ("kb:pep-0837",)}
    findings = check_hash(view, ctx(holders=holders))
    assert [f.kind for f in findings] == ["in_place_edit", "id_reused"]
    reused = findings[1]
    assert reused.severity is Severity.WARNING
    assert reused.actual == {"moved_to": ["kb:pep-0840"], "source_hash": "sha256:new"}
    assert not reused.changes
    assert reused.reingest is None
    assert "kb:pep-0840" in reused.action
    # An edit in place, with the old text nowhere else: no id_reused.
    assert [f.kind for f in check_hash(view, ctx(holders={}))] == ["in_place_edit"]
