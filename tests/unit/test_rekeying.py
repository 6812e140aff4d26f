"""The pairs of a re-keying (``rules.rekeying``): one to one by last path, every ambiguity a
conflict, plain values in and out."""

from __future__ import annotations

import itertools
import json
from dataclasses import replace
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from reconciler.model import Document, PayloadWrite, SourceDocument, VersionState
from reconciler.rules.rekeying import RekeyPair, RekeyPlan, pair_documents
from reconciler.writing.executing import Executable
from reconciler.writing.rekeying import Rekeying, whole_documents


def row(key: str, *, source: str = "hb", state: VersionState = VersionState.CURRENT) -> Document:
    return Document(
        doc_id=f"{source}:{key}",
        source=source,
        source_key=key,
        doc_family_id=f"{source}:fam-{key}",
        doc_version=1,
        version_state=state,
        chunk_count=3,
    )


def doc(key: str, path: str, *, source: str = "hb") -> SourceDocument:
    return SourceDocument(source, key, f"{source}:{key}", f"sha256:{key}", path=path)


def plan(
    docs: list[SourceDocument],
    gone: list[Document],
    paths: dict[str, str],
    registered: tuple[str, ...] = (),
) -> RekeyPlan:
    return pair_documents(
        "hb", docs, gone=gone, paths=paths, registered={f"hb:{r}": row(r) for r in registered}
    )


def test_a_document_at_its_last_path_under_a_new_id_is_one_pair() -> None:
    found = plan([doc("POL-1", "a.md"), doc("b", "b.md")], [row("a")], {"a": "a.md"})
    assert found.pairs == (
        RekeyPair("hb", "hb:a", "hb:POL-1", "a", "POL-1", "a.md", "hb:fam-a", 3),
    )
    assert found.conflicts == ()
    assert found.old_ids == {"hb:a"}
    assert found.new_ids == {"hb:POL-1"}


def test_what_is_missing_retired_still_held_or_elsewhere_is_no_pair() -> None:
    docs = [doc("POL-1", "a.md"), doc("c", "c.md")]
    assert not plan(docs, [row("x")], {"x": "gone.md"})  # its path holds nothing now
    assert not plan(docs, [row("y")], {})  # no recorded path
    assert not plan(docs, [row("a", state=VersionState.RETIRED)], {"a": "a.md"})
    assert not plan(docs, [row("c")], {"c": "a.md"})  # its id is still in the source
    other = pair_documents(
        "hb", docs, gone=[row("a", source="wiki")], paths={"a": "a.md"}, registered={}
    )
    assert not other


def test_every_ambiguity_is_a_conflict_never_a_guess() -> None:
    two_old = plan([doc("POL-1", "a.md")], [row("a"), row("a2")], {"a": "a.md", "a2": "a.md"})
    assert two_old.pairs == ()
    assert [(c.doc_ids, c.reason) for c in two_old.conflicts] == [
        (("hb:a", "hb:a2", "hb:POL-1"), "two or more old ids at one path")
    ]
    two_new = plan([doc("P1", "a.md"), doc("P2", "a.md")], [row("a")], {"a": "a.md"})
    assert two_new.pairs == ()
    assert two_new.conflicts[0].reason == "two or more new ids at one path"
    taken = plan([doc("POL-1", "a.md")], [row("a")], {"a": "a.md"}, registered=("POL-1",))
    assert taken.pairs == ()
    assert taken.conflicts[0].reason == "the new id is already registered as another document"
    assert taken.conflicts[0].to_json()["path"] == "a.md"


def test_the_plan_does_not_depend_on_the_input_order() -> None:
    docs = [doc(f"P{n}", f"{n}.md") for n in range(5)]
    gone = [row(str(n)) for n in range(5)]
    paths = {str(n): f"{n}.md" for n in range(5)}
    assert plan(docs, gone, paths) == plan(docs[::-1], gone[::-1], paths)
    assert len(plan(docs, gone, paths).pairs) == 5


def test_swapped_undoes_and_the_json_reads_back() -> None:
    found = plan([doc("POL-1", "a.md")], [row("a")], {"a": "a.md"})
    pair = found.pairs[0]
    assert RekeyPair.from_json(pair.to_json()) == pair
    back = found.swapped().pairs[0]
    assert (back.old_id, back.new_id, back.old_key, back.new_key) == (
        "hb:POL-1",
        "hb:a",
        "POL-1",
        "a",
    )
    assert found.swapped().swapped() == RekeyPlan(found.pairs)
    assert (found + RekeyPlan()).pairs == found.pairs


@given(
    st.lists(st.tuples(st.sampled_from("abcdef"), st.integers(1, 5)), max_size=8),
    st.integers(1, 6),
)
def test_a_payload_batch_never_splits_a_document(docs: list[tuple[str, int]], most: int) -> None:
    writes = [
        PayloadWrite((f"{n}-{i}",), {"doc_id": doc}, doc_id=doc)
        for n, (doc, points) in enumerate(docs)
        for i in range(points)
    ]
    batches = list(whole_documents(writes, most))
    assert [w for batch in batches for w in batch] == writes
    for batch in batches:
        assert batch
        held = [w.doc_id for w in batch]
        assert len(batch) <= most or len(set(held)) == 1  # (one document larger than most)
    ends = [(a[-1].doc_id, b[0].doc_id) for a, b in itertools.pairwise(batches)]
    assert all(left != right for left, right in ends)


def adopted(key: str, doc_id: str) -> Document:
    """A row as ``reconciler bootstrap`` adopts it: an id of no ``hb:`` form, its key."""
    return Document(doc_id, "hb", key, f"hb:fam-{key}", 1, VersionState.CURRENT, chunk_count=2)


def test_a_row_that_holds_the_same_source_key_under_another_id_pairs_by_key() -> None:
    found = plan([doc("leave", "leave.md")], [adopted("leave", "leave")], {})
    assert found.pairs == (
        RekeyPair("hb", "leave", "hb:leave", "leave", "leave", "leave.md", "hb:fam-leave", 2),
    )
    two_old = plan(
        [doc("leave", "leave.md")], [adopted("leave", "leave"), adopted("leave", "LEAVE")], {}
    )
    assert [(c.doc_ids, c.reason) for c in two_old.conflicts] == [
        (("LEAVE", "leave", "hb:leave"), "two or more old ids at one path")
    ]
    taken = plan([doc("leave", "leave.md")], [adopted("leave", "leave")], {}, ("leave",))
    assert (taken.pairs, taken.conflicts[0].reason) == (
        (),
        "the new id is already registered as another document",
    )


def test_a_rekeying_is_a_plan_its_intent_gives_back() -> None:
    """What the runner that finds a re-keying killed executes (``Rekeying.audited``) is the
    plan that was audited, from its intent alone."""
    pair = RekeyPair("hb", "hb:old", "hb:new", "old", "new", "a.md", "fam", 2)
    points = {"hb:old": (("p1", "hb:old#0", None), (2, "hb:old#1", "hb:old")), "hb:x": ()}
    planned = Rekeying((pair,), points)
    executable: Executable = planned
    intent = planned.intent(run_id="r", actor="rekey", at=datetime(2026, 12, 5, tzinfo=UTC))
    stored = replace(  # (as the audit log gives it back: JSON)
        intent,
        before=json.loads(json.dumps(intent.before)),
        after=json.loads(json.dumps(intent.after)),
    )
    assert Rekeying.audited(stored, "h") == Rekeying((pair,), points, "h")
    assert executable.execute == planned.execute
