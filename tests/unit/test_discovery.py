"""Discovery (``reconciler.discovery``): markers read from names, pairs scored with their
evidence in words, the direction (or "no direction"), proposals read back, and the promise of
blocking: it misses no pair that scoring every pair would propose."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.discovery import (
    DEFAULT_MIN_SCORE,
    ProposalsError,
    discover,
    profile,
    read_proposals,
    score_pair,
)
from reconciler.discovery.blocking import (
    BANDS,
    ROWS,
    band_neighbours,
    brute_force,
    prepare,
    scored_pairs,
)
from reconciler.discovery.claims import read_claims
from reconciler.discovery.signals import NUM_PERM, fold, markers_of

BODY = (
    "Meals when travelling: you can claim up to 40 EUR per day for meals when travelling, "
    "with receipts. Claims for meals and travel must be submitted within 60 days."
)


def doc(
    name: str,
    *,
    title: str | None = None,
    path: str | None = None,
    body: str | None = None,
    when: str | None = None,
    family: str | None = None,
):  # type: ignore[no-untyped-def]
    return profile(
        doc_id=f"s:{name}",
        source="s",
        family=family or name,
        doc_class=None,
        title=title,
        path=path,
        effective_from=datetime.fromisoformat(when).replace(tzinfo=UTC) if when else None,
        body=body,
    )


@pytest.mark.parametrize(
    ("name", "stem", "says"),
    [
        ("travel-policy-2025", "travel policy", [("2025", "year")]),
        ("deploy_runbook_old", "deploy runbook", [("old", "older")]),
        ("Handbook v2", "handbook", [("v2", "version")]),
        ("Expenses (superseded)", "expenses", [("(superseded)", "older")]),
        ("salary-bands-last-year", "salary bands", [("last-year", "older")]),
        ("Metadata for Python Software Packages 1.2", "metadata for python software packages",
         [("1.2", "version")]),
        ("notes 2024-03-01", "notes", [("2024-03-01", "date")]),
        ("pep-0345", "pep 0345", []),
        # a number that words of the name follow says what the document is about
        ("2024 Term Steering Council election", "2024 term steering council election", []),
        ("Python 3.9 Release Schedule", "python 3 9 release schedule", []),
        ("2024-03-01 meeting notes", "2024 03 01 meeting notes", []),
        ("Travel policy 2025 (superseded)", "travel policy",
         [("(superseded)", "older"), ("2025", "year")]),
        ("API v2 reference", "api reference", [("v2", "version")]),
        ("Employee handbook 2024 edition", "employee handbook edition", [("2024", "year")]),
        ("Deploy runbook (2023) for operators", "deploy runbook for operators",
         [("2023", "year")]),
    ],
)  # fmt: skip
def test_markers_come_out_of_names(name: str, stem: str, says: list[tuple[str, str]]) -> None:
    got_stem, markers, _ = markers_of(name)
    assert got_stem == stem
    assert [(m.text, m.says) for m in markers] == says


def test_a_pair_is_scored_with_its_evidence_in_words() -> None:
    old = doc("a", title="Travel policy 2025", path="policies/travel-2025.md", body=BODY,
              when="2025-01-01")  # fmt: skip
    new = doc("b", title="Travel policy 2026", path="policies/travel.md", body=BODY + " Also.",
              when="2026-01-01")  # fmt: skip
    scored = score_pair(new, old)
    assert scored.direction == ("s:a", "s:b")
    assert scored.score >= DEFAULT_MIN_SCORE
    assert scored.evidence.startswith("titles 1.00 alike; paths 1.00 alike; bodies ")
    assert scored.evidence.endswith("alike; dates 2025-01-01 -> 2026-01-01")


def test_markers_and_ordinals_tell_the_newer_without_dates() -> None:
    scored = score_pair(doc("a", title="Runbook", path="ops/runbook_old.md"),
                        doc("b", title="Runbook", path="ops/runbook.md"))  # fmt: skip
    assert scored.direction == ("s:a", "s:b")
    assert "`old` in the older name" in scored.evidence
    versions = score_pair(doc("c", title="API v2"), doc("d", title="API v1"))
    assert versions.direction == ("s:d", "s:c")
    assert "versions 1 -> 2" in versions.evidence


def test_a_year_only_one_name_carries_is_named() -> None:
    scored = score_pair(
        doc(
            "a",
            title="Onboarding guide (2019)",
            path="people/onboarding-2019.md",
            when="2019-05-01",
        ),
        doc("b", title="Onboarding", path="people/onboarding.md", when="2025-09-01"),
    )
    assert scored.direction == ("s:a", "s:b")
    assert scored.evidence == (
        "titles 0.77 alike; paths 1.00 alike; dates 2019-05-01 -> 2025-09-01; "
        "`2019` in the older name only"
    )


def test_split_evidence_is_no_direction() -> None:
    # the "_old" one is the later by its date: nothing can say which is the newer
    scored = score_pair(
        doc("a", title="Guide", path="guide_old.md", when="2026-01-01"),
        doc("b", title="Guide", path="guide.md", when="2024-01-01"),
    )
    assert scored.direction is None
    assert "no direction: the evidence is split" in scored.evidence
    found = discover([doc("a", title="Guide", path="guide_old.md", when="2026-01-01"),
                      doc("b", title="Guide", path="guide.md", when="2024-01-01")])  # fmt: skip
    (link,) = found.links
    assert link.direction == "no direction"


def test_two_things_told_apart_by_a_number_are_not_versions() -> None:
    scored = score_pair(doc("a", title="X100 datasheet", path="x100-datasheet.md"),
                        doc("b", title="X200 datasheet", path="x200-datasheet.md"))  # fmt: skip
    assert scored.score < DEFAULT_MIN_SCORE
    assert scored.titles is None


def test_events_named_by_their_term_or_release_are_a_series_not_versions() -> None:
    # one election a year, each body from the same template: alike, yet none replaces another
    template = "The election for the {} term of the Steering Council. Nominations open, then "
    template += "a vote of two weeks among the core team; the five with most votes are elected."
    elections = [
        doc(f"pep-81{n:02d}", title=f"{2019 + n} Term Steering Council election",
            body=template.format(2019 + n), when=f"{2018 + n}-11-01")
        for n in range(1, 8)
    ]  # fmt: skip
    schedules = [
        doc(f"pep-{n}", title=f"Python 3.{minor} Release Schedule", when=f"{2007 + minor}-05-01")
        for n, minor in ((569, 8), (596, 9), (619, 10))
    ]
    assert discover([*elections, *schedules]).links == ()
    # the same names with the year at the end are editions of one document
    editions = [
        doc(f"travel-{year}", title=f"Travel policy {year}", body=template.format(year))
        for year in (2024, 2025)
    ]
    (link,) = discover(editions).links
    assert (link.older, link.newer) == ("s:travel-2024", "s:travel-2025")


def test_a_year_folder_is_still_an_edition_marker() -> None:
    old = doc("a", title="Travel policy", path="archive/2021/travel-policy.md")
    new = doc("b", title="Travel policy", path="policies/travel-policy.md")
    assert [m.text for m in old.markers] == ["2021", "archive/"]
    assert score_pair(old, new).direction == ("s:a", "s:b")


def _claims(body: str, own: str) -> tuple[set[str], set[str], set[str]]:
    word, _, number = own.partition(" ")
    read = read_claims(fold(body), (word, int(number)))
    name = " ".join
    return (
        {f"{w} {n}" for w, n in read.replaces},
        {f"{w} {n}" for w, n in read.replaced_by},
        {f"{name(map(str, old))} -> {name(map(str, new))}" for old, new in read.between},
    )


@pytest.mark.parametrize(
    ("own", "body", "replaces", "replaced_by", "between"),
    [
        ("pep 314", "This PEP supersedes PEP 241.", {"pep 241"}, set(), set()),
        ("pep 634", "It replaces PEP 622, which is hereby split in three parts.",
         {"pep 622"}, set(), set()),
        ("pep 600", "This PEP supersedes PEPs 513, 571 and 599.",
         {"pep 513", "pep 571", "pep 599"}, set(), set()),
        ("pep 773", 'This proposal would effectively replace :pep:`397` ("Python launcher for '
         'Windows") and :pep:`486` ("Make the Python Launcher aware of virtual environments").',
         {"pep 397", "pep 486"}, set(), set()),
        ("rfc 2822", "Superseded by RFC 5322.", set(), {"rfc 5322"}, set()),
        # a banner with a bare number names a document of its own kind
        ("pep 215", "Post-History:\n\n.. superseded:: 292\n\nAbstract", set(), {"pep 292"}, set()),
        ("rfc 2822", "Obsoletes: 822\nCategory: Standards Track", {"rfc 822"}, set(), set()),
        # a sentence whose subject is another document tells of those two
        ("pep 490", "* :pep:`409` -- Suppressing exception context\n  (superseded by the :pep:`415`)",
         set(), set(), {"pep 409 -> pep 415"}),
        ("pep 496", "PEP 426 (which would replace PEP 345) proposed extensions to the markers.",
         set(), set(), {"pep 345 -> pep 426"}),
        ("pep 749", 'PEP 649 states: "if accepted, this PEP would supersede PEP 563".',
         set(), set(), {"pep 563 -> pep 649"}),
        # not about a document, or not a replacement of one by one
        ("pep 642", "Value constraints replace :pep:`634`'s literal patterns.", set(), set(), set()),
        ("pep 642", "This PEP replaces PEP 634's value patterns with constraints.",
         set(), set(), set()),
        ("pep 691", "where the ``<project>`` is replaced by the\nPEP 503 normalized name",
         set(), set(), set()),
        ("pep 358", "This PEP has partially been superseded by :pep:`3137`.", set(), set(), set()),
        ("pep 262", "This PEP was superseded by :pep:`345` and :pep:`376`, which were accepted.",
         set(), set(), set()),
        ("pep 376", "Combined with PEP 345, the current proposal supersedes PEP 262.",
         set(), set(), set()),
        ("rfc 2822", "This memo supplements rather than supersedes RFC 822.", set(), set(), set()),
        ("adr 9", "Context.\n> This decision replaces ADR 7, they said.", set(), set(), set()),
        ("adr 9", "The 2 servers are replaced in 2025 by new ones.", set(), set(), set()),
    ],
)  # fmt: skip
def test_a_body_is_read_for_what_replaces_what(
    own: str, body: str, replaces: set[str], replaced_by: set[str], between: set[str]
) -> None:
    assert _claims(body, own) == (replaces, replaced_by, between)


def test_a_claim_is_read_wherever_the_body_makes_it() -> None:
    long = "Background. " * 6000 + "This proposal would replace PEP 397."
    assert len(long) > 70_000
    assert _claims(long, "pep 773")[0] == {"pep 397"}


def test_a_third_document_telling_of_a_replacement_links_the_two() -> None:
    old = doc("pep-0409", title="Suppressing exception context", when="2012-01-26")
    new = doc("pep-0415", title="Implement context suppression with exception attributes",
              when="2012-02-26")  # fmt: skip
    teller = doc(
        "pep-0490",
        title="Chain exceptions at C level",
        body="* PEP 409 -- Suppressing exception context\n  (superseded by the PEP 415)",
    )
    (link,) = discover([teller, new, old]).links
    assert (link.older, link.newer) == ("s:pep-0409", "s:pep-0415")
    assert "pep-0490 says pep-0415 replaces pep-0409" in link.evidence
    assert link.score >= DEFAULT_MIN_SCORE


def test_a_body_saying_it_replaces_another_links_them_unless_it_says_it_does_not() -> None:
    old = doc("rfc-0822", title="Message format", body="The format of messages.")
    new = doc("rfc-2822", title="Internet text messages", body="This memo obsoletes RFC 822.")
    scored = score_pair(old, new)
    assert scored.direction == ("s:rfc-0822", "s:rfc-2822")
    assert "a body says rfc-2822 replaces rfc-0822" in scored.evidence
    assert scored.score >= DEFAULT_MIN_SCORE
    denied = doc(
        "rfc-2822", title="Other", body="This memo supplements rather than supersedes RFC 822."
    )
    assert score_pair(old, denied).score < DEFAULT_MIN_SCORE
    passive = doc("rfc-0822", title="Message format", body="This memo is superseded by RFC 2822.")
    assert score_pair(passive, doc("rfc-2822", title="x")).direction == ("s:rfc-0822", "s:rfc-2822")


def test_a_chain_is_proposed_link_by_link_and_as_one_family() -> None:
    docs = [doc(f"v{n}", title=f"Pricing {2020 + n}", body=BODY) for n in range(3)]
    found = discover(docs)
    assert sorted((p.older, p.newer) for p in found.links) == [("s:v0", "s:v1"), ("s:v1", "s:v2")]
    (family,) = found.families
    assert family.members == ("s:v0", "s:v1", "s:v2")


def test_min_score_filters_and_documents_of_one_family_are_not_proposed() -> None:
    a = doc("a", title="Pricing 2020", path="p.md")
    b = doc("b", title="Pricing 2021", path="q.md")
    assert len(discover([a, b]).links) == 1
    assert discover([a, b], min_score=0.99).links == ()
    same = [doc("a", title="Pricing 2020", family="f"), doc("b", title="Pricing 2021", family="f")]
    assert discover(same).links == ()


def test_proposals_round_trip_and_bad_files_list_every_problem() -> None:
    found = discover([doc("a", title="Pricing 2020"), doc("b", title="Pricing 2021")])
    back = read_proposals(found.as_dict())
    assert back.proposals == found.proposals
    data = found.as_dict()
    data["proposals"][0] |= {"decision": "maybe", "direction": "sideways"}
    data["proposals"][1]["members"] = ["only-one"]
    with pytest.raises(ProposalsError) as caught:
        read_proposals(data)
    assert len(caught.value.problems) == 3


# -- the promise of blocking ------------------------------------------------------------------

WORDS = ["travel", "policy", "deploy", "runbook", "x100", "x200", "guide", "sales", "api"]
MARKS = ["", " 2024", " 2025", " v2", " (superseded)", "_old", " 1.2"]


@st.composite
def corpora(draw: st.DrawFn):  # type: ignore[no-untyped-def]
    size = draw(st.integers(2, 12))
    docs = []
    for n in range(size):
        # some names of words of their own: only the bodies or a reference bring those together
        naming = WORDS if draw(st.booleans()) else [f"name{n}x{i}" for i in range(3)]
        words = draw(st.lists(st.sampled_from(naming), min_size=1, max_size=3))
        title = " ".join(words) + draw(st.sampled_from(MARKS))
        path = "-".join(draw(st.permutations(words))) + draw(st.sampled_from(MARKS)) + ".md"
        # some bodies of words of their own: only a reference can bring those together
        vocabulary = WORDS if draw(st.booleans()) else [f"only{n}x{i}" for i in range(9)]
        body = " ".join(draw(st.lists(st.sampled_from(vocabulary), min_size=0, max_size=12)))
        if draw(st.booleans()):
            body += f" This replaces item {draw(st.integers(0, size))}."
        if draw(st.booleans()):  # a statement about two others
            body += f" Item {draw(st.integers(0, size))} (superseded by item {draw(st.integers(0, size))})."
        docs.append(doc(f"item-{n}", title=title, path=path, body=body or None))
    return docs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(corpora(), st.sampled_from([0.6, DEFAULT_MIN_SCORE, 0.8]), st.integers(2, 6))
def test_blocking_misses_no_pair_brute_force_scores_above_the_threshold(
    docs, floor: float, max_block: int
) -> None:  # type: ignore[no-untyped-def]
    ready = prepare(docs, max_block=max_block)
    every = {(s.a, s.b): s.score for s in brute_force(ready, floor=floor)}
    blocked = {(s.a, s.b): s.score for s in scored_pairs(ready, floor=floor)}
    assert blocked == every


def test_bodies_agreeing_on_more_than_one_value_in_bands_are_always_met() -> None:
    # pigeonhole: fewer differing values than bands leave one band equal, wherever they fall
    base = np.arange(NUM_PERM, dtype=np.uint32)
    a = replace(doc("a", title="one"), body=base.tobytes())
    for differing in range(1, BANDS + 1):
        other = base.copy()
        other[[k * ROWS for k in range(differing)]] += (
            1000  # one value off in each of the first bands
        )
        b = replace(doc("b", title="two"), body=other.tobytes())
        met = 1 in band_neighbours([a, b]).get(0, [])
        assert met == (differing < BANDS), differing
