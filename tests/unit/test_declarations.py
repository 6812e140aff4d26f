"""``rules.declarations.overlay``: what a person's declarations add to a run's reading of the
sources, on plain values. A system of record's own word wins (every way it can say
otherwise is a conflict, and the declaration is not applied); a row no configured source holds
stands in for its source; families follow the declared links; a declared successor never
leaves nothing served; a cycle never closes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.model import (
    OPEN_END,
    Declaration,
    DeclarationKind,
    Document,
    SourceDocument,
    VersionState,
)
from reconciler.rules.declarations import families_touched, overlay, synthesized

T = datetime(2026, 1, 1, tzinfo=UTC)
SUPERSEDE, FAMILY = DeclarationKind.SUPERSEDE, DeclarationKind.FAMILY


def row(key: str, source: str = "old", **values: object) -> Document:
    fields: dict[str, object] = {
        "doc_id": f"{source}:{key}",
        "source": source,
        "source_key": key,
        "doc_family_id": f"{source}:{key}",
        "doc_version": 1,
        "version_state": VersionState.UNKNOWN,
        "source_hash": f"sha256:{key}",
    }
    fields.update(values)
    return Document(**fields)  # type: ignore[arg-type]


def src(key: str, source: str = "vault", **values: object) -> SourceDocument:
    fields: dict[str, object] = {
        "source": source,
        "source_key": key,
        "doc_id": f"{source}:{key}",
        "content_hash": f"sha256:{key}",
    }
    fields.update(values)
    return SourceDocument(**fields)  # type: ignore[arg-type]


def decl(kind: DeclarationKind, doc_id: str, target: str, n: int = 0) -> Declaration:
    return Declaration(
        id=f"d-{n}",
        kind=kind,
        doc_id=doc_id,
        target=target,
        declared_by="alice",
        declared_at=T + timedelta(seconds=n),
    )


def adopted(*keys: str, **values: dict[str, object]) -> dict[str, Document]:
    return {f"old:{k}": row(k, **values.get(k, {})) for k in keys}


def test_a_row_no_source_holds_stands_for_its_source() -> None:
    rows = adopted(
        "a",
        "b",
        a={"effective_from": T, "version_state": VersionState.CURRENT},
        b={"effective_from": T + timedelta(days=1)},
    )
    found = overlay(
        [decl(SUPERSEDE, "old:a", "old:b")],
        rows=rows,
        sources={},
        family_of={},
        configured=frozenset({"vault"}),
        read=frozenset({"vault"}),
    )
    assert found.conflicts == ()
    assert found.applied == {"d-0"}
    assert found.declared_only == {"old"}
    a = found.documents["old:a"]
    assert (a.state, a.superseded_by, a.effective_from, a.version) == (
        VersionState.CURRENT,
        "old:b",
        T,
        1,
    )
    assert found.documents["old:b"].state is None  # unknown: the time rule's to say
    # the two families become one: a tie, so the one holding the oldest version
    assert found.family_of == {"old:b": "old:a"}
    assert "d-0" in found.because["old:b"]


@pytest.mark.parametrize(
    ("state", "link", "kept"),
    [
        (VersionState.UNKNOWN, None, None),
        (VersionState.SUPERSEDED, "old:z", None),  # derived again from its link
        (VersionState.SUPERSEDED, None, VersionState.SUPERSEDED),  # its own word
        (VersionState.CURRENT, None, VersionState.CURRENT),
        (VersionState.RETIRED, None, VersionState.RETIRED),
        (VersionState.DRAFT, None, VersionState.DRAFT),
        (VersionState.PENDING, None, VersionState.PENDING),
    ],
)
def test_a_synthesized_document_keeps_only_a_state_of_the_rows_own(
    state: VersionState, link: str | None, kept: VersionState | None
) -> None:
    made = synthesized(row("a", version_state=state, superseded_by=link))
    assert made.state is kept
    assert made.superseded_by == link
    assert synthesized(row("a", effective_to=OPEN_END)).effective_to is None


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        (src("a", superseded_by="vault:x"), src("b"), "superseded by vault:x, not by vault:b"),
        (src("a"), src("b", superseded_by="vault:a"), "declares the reverse"),
        (src("a", state=VersionState.CURRENT), src("b"), "declares it current"),
        (src("a", state=VersionState.RETIRED), src("b"), "declares it retired"),
        (src("a", state=VersionState.DRAFT), src("b"), "declares it draft"),
    ],
)
def test_a_source_that_says_otherwise_wins(
    old: SourceDocument, new: SourceDocument, message: str
) -> None:
    rows = {d.doc_id: row(d.source_key, source="vault") for d in (old, new)}
    sources = {old.doc_id: old, new.doc_id: new}
    found = overlay(
        [decl(SUPERSEDE, "vault:a", "vault:b")],
        rows=rows,
        sources=sources,
        family_of={"vault:a": "vault:a", "vault:b": "vault:b"},
        configured=frozenset({"vault"}),
        read=frozenset({"vault"}),
    )
    [conflict] = found.conflicts
    assert conflict.doc_id == "vault:a"
    assert message in conflict.message
    assert found.applied == frozenset()
    assert found.documents == {}
    assert found.family_of == {}


def test_a_source_that_is_silent_takes_the_declaration() -> None:
    a, b = src("a", state=VersionState.SUPERSEDED), src("b")
    found = overlay(
        [decl(SUPERSEDE, "vault:a", "vault:b")],
        rows={"vault:a": row("a", source="vault"), "vault:b": row("b", source="vault")},
        sources={"vault:a": a, "vault:b": b},
        family_of={"vault:a": "vault:a", "vault:b": "vault:b"},
        configured=frozenset({"vault"}),
        read=frozenset({"vault"}),
    )
    assert found.conflicts == ()
    assert found.documents["vault:a"].declared_successors == ("vault:b",)
    assert found.declared_only == frozenset()  # judged as its source's document


def test_a_source_that_already_says_so_is_not_a_conflict() -> None:
    a = src("a", superseded_by="vault:b")
    found = overlay(
        [decl(SUPERSEDE, "vault:a", "vault:b")],
        rows={"vault:a": row("a", source="vault"), "vault:b": row("b", source="vault")},
        sources={"vault:a": a, "vault:b": src("b")},
        family_of={"vault:a": "vault:f", "vault:b": "vault:f"},
        configured=frozenset({"vault"}),
        read=frozenset({"vault"}),
    )
    assert (found.conflicts, found.documents, found.family_of) == ((), {}, {})


def test_a_source_that_could_not_be_read_leaves_its_declarations_waiting() -> None:
    found = overlay(
        [decl(SUPERSEDE, "vault:a", "old:b"), decl(FAMILY, "vault:a", "old:f", 1)],
        rows={"vault:a": row("a", source="vault"), "old:b": row("b")},
        sources={},
        family_of={},
        configured=frozenset({"vault"}),
        read=frozenset(),
    )
    assert (found.conflicts, found.applied, found.documents, found.family_of) == (
        (),
        frozenset(),
        {},
        {},
    )


def test_declared_families_against_a_source() -> None:
    sources = {
        "vault:a": src("a", family="leave"),
        "vault:b": src("b", superseded_by="vault:c"),
        "vault:c": src("c"),
        "vault:d": src("d"),
    }
    rows = {k: row(k.split(":")[1], source="vault") for k in sources}
    family_of = {"vault:a": "vault:leave", "vault:b": "vault:b", "vault:c": "vault:b"}
    family_of["vault:d"] = "vault:d"
    found = overlay(
        [decl(FAMILY, d, "vault:hr", n) for n, d in enumerate(sorted(sources))],
        rows=rows,
        sources=sources,
        family_of=family_of,
        configured=frozenset({"vault"}),
        read=frozenset({"vault"}),
    )
    assert {c.doc_id: c.message for c in found.conflicts} == {
        "vault:a": "its source declares family 'vault:leave'",
        "vault:b": "its source links it to other documents, which place it in 'vault:b'",
        "vault:c": "its source links it to other documents, which place it in 'vault:b'",
    }
    assert found.family_of == {"vault:d": "vault:hr"}


def test_a_declared_successor_that_leads_nowhere_is_refused() -> None:
    rows = adopted(
        "a",
        "dead",
        "gone",
        "next",
        dead={"version_state": VersionState.SUPERSEDED},
        gone={"version_state": VersionState.SUPERSEDED, "superseded_by": "old:next"},
    )
    found = overlay(
        [decl(SUPERSEDE, "old:a", "old:dead"), decl(SUPERSEDE, "old:a", "old:gone", 1)],
        rows=rows,
        sources={},
        family_of={},
        configured=frozenset(),
        read=frozenset(),
    )
    [conflict] = found.conflicts
    assert conflict.declaration.target == "old:dead"
    assert "nothing served" in conflict.message
    assert found.documents["old:a"].declared_successors == ("old:gone",)


def test_a_retired_successor_closes_nothing_so_it_may_be_declared() -> None:
    rows = adopted("a", "b", b={"version_state": VersionState.RETIRED})
    found = overlay(
        [decl(SUPERSEDE, "old:a", "old:b")],
        rows=rows,
        sources={},
        family_of={},
        configured=frozenset(),
        read=frozenset(),
    )
    assert found.conflicts == ()


def test_links_that_join_two_declared_families_leave_them_apart() -> None:
    found = overlay(
        [
            decl(FAMILY, "old:a", "hr", 0),
            decl(FAMILY, "old:b", "ops", 1),
            decl(SUPERSEDE, "old:a", "old:b", 2),
        ],
        rows=adopted("a", "b"),
        sources={},
        family_of={},
        configured=frozenset(),
        read=frozenset(),
    )
    [conflict] = found.conflicts
    assert "two declared families" in conflict.message
    assert found.family_of == {"old:a": "hr", "old:b": "ops"}


def test_joined_families_keep_the_one_holding_the_most_members() -> None:
    rows = adopted("a", "b1", "b2", "b3")
    rows = {
        k: (r if k == "old:a" else row(r.source_key, doc_family_id="old:b"))
        for k, r in rows.items()
    }
    found = overlay(
        [decl(SUPERSEDE, "old:a", "old:b1")],
        rows=rows,
        sources={},
        family_of={},
        configured=frozenset(),
        read=frozenset(),
    )
    assert found.family_of == {"old:a": "old:b"}  # one moves, not three
    assert families_touched([decl(SUPERSEDE, "old:a", "old:b1")], rows, {}) == {
        "old:a",
        "old:b",
    }


@st.composite
def chains(draw: st.DrawFn) -> tuple[dict[str, Document], list[Declaration]]:
    """Rows no source holds, and random declared links among them (cycles included)."""
    keys = [f"d{n}" for n in range(draw(st.integers(2, 7)))]
    states = st.sampled_from(list(VersionState))
    rows = {f"old:{k}": row(k, version_state=draw(states)) for k in keys}
    pairs = draw(
        st.lists(st.tuples(st.sampled_from(keys), st.sampled_from(keys)), min_size=1, max_size=10)
    )
    return rows, [decl(SUPERSEDE, f"old:{a}", f"old:{b}", n) for n, (a, b) in enumerate(pairs)]


@given(chains())
def test_the_applied_links_never_close_a_cycle_and_every_one_leads_somewhere(
    case: tuple[dict[str, Document], list[Declaration]],
) -> None:
    rows, declared = case
    found = overlay(
        declared, rows=rows, sources={}, family_of={}, configured=frozenset(), read=frozenset()
    )
    links = {doc_id: doc.declared_successors for doc_id, doc in found.documents.items()}
    # no cycle through the links the documents carry (brute force: follow every path)
    for start, first in links.items():
        seen, stack = set(), list(first)
        while stack:
            node = stack.pop()
            assert node != start, f"a cycle through {start}"
            if node not in seen:
                seen.add(node)
                stack += links.get(node, ())
    refused = {c.declaration.id for c in found.conflicts}
    assert found.applied == {d.id for d in declared if d.doc_id != d.target} - refused
    # every family a link joined is one family
    for doc_id, successors in links.items():
        for successor in successors:
            if (doc_id, successor) in {(d.doc_id, d.target) for d in declared}:
                family = found.family_of.get(doc_id, rows[doc_id].doc_family_id)
                assert found.family_of.get(successor, rows[successor].doc_family_id) == family
