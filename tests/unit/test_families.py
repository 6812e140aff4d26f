"""Family resolution: explicit families, supersession components, and ids that stay stable."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconciler.model import SourceDocument
from reconciler.rules.identity import FamilyAssignment, resolve_families


def sd(
    key: str,
    *,
    body: str | None = None,
    family: str | None = None,
    version: int | None = None,
    superseded_by: str | None = None,
    source: str = "kb",
) -> SourceDocument:
    text = key if body is None else body
    return SourceDocument(
        source=source,
        source_key=key,
        doc_id=f"{source}:{key}",
        content_hash="sha256:" + hashlib.sha256(text.encode()).hexdigest(),
        family=family,
        version=version,
        superseded_by=None if superseded_by is None else f"{source}:{superseded_by}",
    )


def resolve(
    docs: Sequence[SourceDocument],
    known_by_key: Mapping[str, str] | None = None,
    known_by_hash: Mapping[str, str] | None = None,
) -> FamilyAssignment:
    return resolve_families(
        docs, known_by_key=known_by_key or {}, known_by_hash=known_by_hash or {}
    )


def record(assignment: FamilyAssignment, known: Mapping[str, str]) -> dict[str, str]:
    """What the identity map holds after recording a run's new identities."""
    return {**known, **dict(assignment.new_identities)}


def test_explicit_family_is_prefixed_with_the_source() -> None:
    got = resolve([sd("a", family="leave"), sd("b", family="leave"), sd("c", family="pay")])
    assert dict(got.family_of) == {"kb:a": "kb:leave", "kb:b": "kb:leave", "kb:c": "kb:pay"}


def test_supersession_component_shares_one_family_rooted_at_the_lowest_version() -> None:
    docs = [
        sd("v3", version=3),
        sd("v2", version=2, superseded_by="v3"),
        sd("v1", version=1, superseded_by="v2"),
        sd("alone"),
    ]
    got = resolve(docs)
    assert dict(got.family_of) == {
        "kb:v1": "kb:v1",
        "kb:v2": "kb:v1",
        "kb:v3": "kb:v1",
        "kb:alone": "kb:alone",
    }
    assert got.new_identities == (
        ("alone", "kb:alone"),
        ("v1", "kb:v1"),
        ("v2", "kb:v1"),
        ("v3", "kb:v1"),
    )


def test_missing_versions_sort_last_then_by_source_key() -> None:
    got = resolve(
        [
            sd("b", version=None, superseded_by="c"),
            sd("c", version=None),
            sd("z", version=5, superseded_by="b"),
        ]
    )
    assert set(got.family_of.values()) == {"kb:z"}
    got = resolve([sd("b", superseded_by="a"), sd("a")])
    assert set(got.family_of.values()) == {"kb:a"}


def test_members_inherit_the_one_explicit_family_of_their_component() -> None:
    got = resolve([sd("old", superseded_by="new"), sd("new", family="leave")])
    assert dict(got.family_of) == {"kb:old": "kb:leave", "kb:new": "kb:leave"}


def test_two_explicit_families_in_a_component_are_not_inherited() -> None:
    docs = [sd("a", family="x", superseded_by="b"), sd("b", superseded_by="c"), sd("c", family="y")]
    got = resolve(docs)
    assert dict(got.family_of) == {"kb:a": "kb:x", "kb:b": "kb:b", "kb:c": "kb:y"}


def test_links_to_documents_not_given_are_ignored() -> None:
    got = resolve([sd("a", superseded_by="elsewhere")])
    assert dict(got.family_of) == {"kb:a": "kb:a"}


def test_family_id_is_stable_when_a_new_version_arrives() -> None:
    first = resolve([sd("policy", version=2)])
    known = record(first, {})
    assert known == {"policy": "kb:policy"}
    # A new version with a lower ordinal would root a new id; the identity map keeps the old.
    second = resolve(
        [
            sd("policy", version=2, superseded_by="policy-v3"),
            sd("policy-v3", version=3),
            sd("draft-v1", version=1, superseded_by="policy"),
        ],
        known,
    )
    assert set(second.family_of.values()) == {"kb:policy"}
    assert second.new_identities == (("draft-v1", "kb:policy"), ("policy-v3", "kb:policy"))


def test_several_known_families_pick_the_lowest_ranked_member() -> None:
    docs = [sd("a", version=2, superseded_by="b"), sd("b", version=1)]
    got = resolve(docs, {"a": "kb:fam-a", "b": "kb:fam-b"})
    assert set(got.family_of.values()) == {"kb:fam-b"}
    assert got.new_identities == (("a", "kb:fam-b"),)


def test_joined_known_families_keep_the_one_holding_the_most_members() -> None:
    # a link from a lone note (lowest ranked) into a known chain of three: the lone note
    # moves, not the chain
    docs = [
        sd("a", version=1, superseded_by="d"),
        sd("b", version=2, superseded_by="c"),
        sd("c", version=3, superseded_by="d"),
        sd("d", version=4),
    ]
    known = {"a": "kb:fam-a", "b": "kb:fam-b", "c": "kb:fam-b", "d": "kb:fam-b"}
    got = resolve(docs, known)
    assert set(got.family_of.values()) == {"kb:fam-b"}
    assert got.new_identities == (("a", "kb:fam-b"),)


def test_family_id_is_stable_when_a_note_moves() -> None:
    before = [sd("drafts/policy", body="Policy text.", version=1)]
    known = record(resolve(before), {})
    hashes = {d.content_hash: known[d.source_key] for d in before}
    after = [sd("published/policy", body="Policy text.", version=1)]
    got = resolve(after, known, hashes)
    assert dict(got.family_of) == {"kb:published/policy": "kb:drafts/policy"}
    assert got.new_identities == (("published/policy", "kb:drafts/policy"),)


def test_a_copy_does_not_join_the_original_by_hash() -> None:
    docs = [sd("orig", body="same"), sd("copy", body="same")]
    got = resolve(docs, {"orig": "kb:orig"}, {docs[0].content_hash: "kb:orig"})
    assert dict(got.family_of) == {"kb:orig": "kb:orig", "kb:copy": "kb:copy"}


def test_a_hash_shared_by_several_documents_is_not_evidence() -> None:
    docs = [sd("new1", body=""), sd("new2", body="")]
    got = resolve(docs, {}, {docs[0].content_hash: "kb:old-empty"})
    assert dict(got.family_of) == {"kb:new1": "kb:new1", "kb:new2": "kb:new2"}


def test_a_hash_never_steals_a_family_already_in_use() -> None:
    docs = [sd("moved", body="text"), sd("other", family="old")]
    got = resolve(docs, {}, {docs[0].content_hash: "kb:old"})
    assert dict(got.family_of) == {"kb:moved": "kb:moved", "kb:other": "kb:old"}


def test_a_new_id_never_merges_into_an_existing_family() -> None:
    docs = [sd("leave"), sd("x", family="leave")]
    got = resolve(docs)
    assert dict(got.family_of) == {"kb:leave": "kb:leave~2", "kb:x": "kb:leave"}
    got = resolve([sd("a")], {"gone": "kb:a"})
    assert dict(got.family_of) == {"kb:a": "kb:a~2"}


def test_identities_already_known_are_not_repeated() -> None:
    docs = [sd("a", family="f"), sd("b")]
    got = resolve(docs, {"a": "kb:f", "b": "kb:b"})
    assert got.new_identities == ()
    got = resolve(docs, {"a": "kb:old"})
    assert got.new_identities == (("a", "kb:f"), ("b", "kb:b"))


def test_resolution_is_deterministic_and_idempotent() -> None:
    docs = [sd("a", version=1, superseded_by="b"), sd("b", version=2), sd("c", family="z")]
    first = resolve(docs)
    assert resolve(docs) == first
    known = record(first, {})
    again = resolve(docs, known)
    assert again.family_of == first.family_of
    assert again.new_identities == ()


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="one source"):
        resolve([sd("a"), sd("b", source="other")])
    with pytest.raises(ValueError, match="duplicate"):
        resolve([sd("a"), sd("a")])


def test_empty_input() -> None:
    assert resolve([]) == FamilyAssignment(family_of={}, new_identities=())


# -- property: the result is a function of the set of documents, not of their order ----------

_KEYS = [f"n{i}" for i in range(8)]


@st.composite
def corpora(draw: st.DrawFn) -> tuple[list[SourceDocument], dict[str, str], dict[str, str]]:
    keys = draw(st.lists(st.sampled_from(_KEYS), unique=True, max_size=8))
    docs = [
        sd(
            key,
            body=draw(st.sampled_from(["x", "y", key])),
            family=draw(st.none() | st.sampled_from(["f", "g"])),
            version=draw(st.none() | st.integers(0, 3)),
            superseded_by=draw(st.none() | st.sampled_from(_KEYS)),
        )
        for key in keys
    ]
    families = st.sampled_from(["kb:f", "kb:n0", "kb:old", "kb:n3"])
    by_key = draw(st.dictionaries(st.sampled_from(_KEYS), families, max_size=4))
    by_hash = draw(
        st.dictionaries(
            st.sampled_from([d.content_hash for d in docs] or ["h"]), families, max_size=3
        )
    )
    return docs, by_key, by_hash


@given(corpus=corpora(), data=st.data())
def test_assignment_does_not_depend_on_document_order(
    corpus: tuple[list[SourceDocument], dict[str, str], dict[str, str]], data: st.DataObject
) -> None:
    docs, by_key, by_hash = corpus
    shuffled = data.draw(st.permutations(docs))
    expected = resolve(docs, by_key, by_hash)
    got = resolve(shuffled, by_key, by_hash)
    assert got == expected
    assert list(got.family_of) == list(expected.family_of)
    assert set(got.family_of) == {d.doc_id for d in docs}
    # Every component ends up in exactly one family unless it carries conflicting explicit ones.
    for d in docs:
        if d.superseded_by in got.family_of and d.family is None:
            target = next(x for x in docs if x.doc_id == d.superseded_by)
            if target.family is None:
                assert got.family_of[d.doc_id] == got.family_of[target.doc_id]
