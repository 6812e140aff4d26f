"""The consequence round is the registry's: after a family's plan is made, the checks
registered with a ``consequence`` place run again on the family as that plan leaves it, in the
order of their places, and what they then find is folded into the same plan; a check without
one is not run again."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reconciler.check_inputs import CheckContext, FamilyView
from reconciler.checks import Parts, Registered
from reconciler.model import Document, Finding, Severity, VersionState
from reconciler.pipeline import checking

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def row(key: str, title: str) -> Document:
    return Document(
        doc_id=f"s:{key}",
        source="s",
        source_key=key,
        doc_family_id="s:f",
        doc_version=1,
        version_state=VersionState.CURRENT,
        title=title,
    )


def retitled(check: str, doc: Document, title: str) -> Finding:
    return Finding(
        check=check,
        kind="retitled",
        severity=Severity.WARNING,
        family=doc.doc_family_id,
        doc_id=doc.doc_id,
        expected=title,
        actual=doc.title,
        action="retitle",
        changes={"title": title},
    )


def test_the_consequence_checks_run_again_on_the_planned_family_in_their_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[tuple[str, tuple[str | None, ...]]] = []

    def seen(name: str, view: FamilyView) -> dict[str, str | None]:
        calls.append((name, tuple(r.title for r in view.rows)))
        return {r.source_key: r.title for r in view.rows}

    def first(view: FamilyView, ctx: CheckContext) -> list[Finding]:
        titles = seen("first", view)
        return [retitled("first", view.rows[0], "new")] if titles["a"] == "old" else []

    def later(view: FamilyView, ctx: CheckContext) -> list[Finding]:
        # (finds something only once the plan has retitled a: a consequence of the repair)
        titles = seen("later", view)
        repaired = titles["a"] == "new" and titles["b"] != "new too"
        return [retitled("later", view.rows[1], "new too")] if repaired else []

    def sooner(view: FamilyView, ctx: CheckContext) -> list[Finding]:
        seen("sooner", view)
        return []

    registered = {
        "first": Parts(Registered("first"), family=first),
        "later": Parts(Registered("later", consequence=2), family=later),
        "sooner": Parts(Registered("sooner", consequence=1), family=sooner),
    }
    monkeypatch.setattr(checking, "parts", lambda: registered)
    view = FamilyView(family="s:f", rows=(row("a", "old"), row("b", "b")))
    outcome = checking.check_family(view, CheckContext(now=NOW, sources={}), list(registered))

    assert calls == [
        ("first", ("old", "b")),
        ("later", ("old", "b")),
        ("sooner", ("old", "b")),
        # the round: the consequence checks alone, sooner first, on the family as planned
        ("sooner", ("new", "b")),
        ("later", ("new", "b")),
        ("sooner", ("new", "new too")),
        ("later", ("new", "new too")),
    ]
    assert [(f.check, f.doc_id) for f in outcome.findings] == [
        ("first", "s:a"),
        ("later", "s:b"),
    ]
    assert {u.doc_id: u.after.title for u in outcome.plan.row_updates} == {
        "s:a": "new",
        "s:b": "new too",
    }
    assert set(outcome.timings) == {"first", "later", "sooner"}
