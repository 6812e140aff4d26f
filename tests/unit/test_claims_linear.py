"""Claims are read in time linear in the body, whatever the body (``discovery.claims``): no
pattern is compiled while a body is read (a crafted note whose "replaces" sentences name many
different words made each sentence compile two patterns past ``re``'s cache: ~7 ms a
sentence), the Python-level work per byte is bounded, and a body is read up to
``MAX_CHARS`` only, which the evidence of a proposal then says.

Work is counted, not timed: the profiler's events (every Python call and every call into C,
a regex scan included) while ``read_claims`` runs. Each regex call after the two passes over
the whole body reads a window of bounded size (``SENTENCE`` characters before a verb, a
bounded pattern after it), and a verb takes at least 7 bytes, so events per byte bounded by a
constant is work per byte bounded by a constant. ``python -m bench.claims`` times it.
"""

from __future__ import annotations

import random
import string
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

import hypothesis_kit
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.discovery import discover, profile
from reconciler.discovery.claims import MAX_CHARS, read_claims

#: Profiler events per byte of body, at most (measured: about 2.7 on the worst bodies below).
EVENTS_PER_BYTE = 8
#: Events that do not depend on the body (the call itself, the result).
EVENTS_FIXED = 60

#: Pieces a hostile body is made of: sentences that name a new word each, bare verbs,
#: passive lists, role references, quotation marks, "this" runs, long runs of one character.
PIECES = [
    "this document replaces {w} {n}. ",
    "this policy supersedes {w}s {n}, {n} and {n}. ",
    "superseded by {w} {n} ",
    "supersedes ",
    "replaced with ",
    ":pep:`",
    ":{w}:`x <{n}>` ",
    '"this {w} obsoletes {w} {n}" ',
    "this this this ",
    "> it replaces {w} {n}\n",
    ", {n}",
    " " * 50,
    "\n\n",
    "(" * 20,
    "not partially combined with ",
]


def events(call: Callable[[], Any]) -> tuple[int, int]:
    """(profiler events, calls into the Python code of ``re``) while ``call`` runs."""
    count, compiled = 0, 0

    def tally(frame: FrameType, event: str, arg: object) -> None:
        nonlocal count, compiled
        count += 1
        if event == "call" and "/re/" in frame.f_code.co_filename.replace("\\", "/"):
            compiled += 1

    sys.setprofile(tally)
    try:
        call()
    finally:
        sys.setprofile(None)
    return count, compiled


@st.composite
def bodies(draw: st.DrawFn) -> str:
    rng = random.Random(draw(st.integers(0, 2**32)))
    size = draw(st.integers(0, 20_000))
    hostile = draw(st.booleans())
    out: list[str] = []
    length = 0
    while length < size:
        if hostile or rng.random() < 0.2:
            word = "".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(2, 12)))
            piece = rng.choice(PIECES).format(w=word, n=rng.randint(0, 999_999))
        else:
            piece = "".join(rng.choice(string.printable) for _ in range(rng.randint(1, 80)))
        out.append(piece)
        length += len(piece)
    return "".join(out).lower()


@settings(max_examples=hypothesis_kit.examples(60))
@given(bodies(), st.sampled_from([None, ("pep", 1), ("rfc", 822), ("policy", 7)]))
def test_work_per_byte_is_bounded_and_nothing_is_compiled_while_reading(
    body: str, own: tuple[str, int] | None
) -> None:
    read_claims("this document replaces pep 1.", own)  # (warm: first calls of anything)
    count, compiled = events(lambda: read_claims(body, own))
    assert compiled == 0, "a pattern was compiled (or looked up in re's cache) per body"
    assert count <= EVENTS_PER_BYTE * len(body) + EVENTS_FIXED, (count, len(body))


def test_the_crafted_note_of_the_attack_costs_what_any_body_does() -> None:
    """A note of "replaces" sentences each naming a word never seen before (the attack's
    ~107 KB note), against one that names the same word every time: the same work."""
    rng = random.Random(7)
    crafted = "".join(
        f"this document replaces {''.join(rng.choices(string.ascii_lowercase, k=9))} {n}. "
        for n in range(3_000)
    )
    same = "".join(f"this document replaces something {n}. " for n in range(3_000))
    read_claims(same)
    crafted_events, crafted_compiled = events(lambda: read_claims(crafted))
    same_events, _ = events(lambda: read_claims(same))
    assert crafted_compiled == 0
    assert crafted_events / len(crafted) <= 1.5 * same_events / len(same)


@settings(max_examples=hypothesis_kit.examples(30))
@given(bodies(), st.integers(100, 3_000))
def test_a_body_is_read_up_to_the_cap_and_the_claims_say_so(body: str, cap: int) -> None:
    long = body + "this document replaces pep 4242. " * 10
    claims = read_claims(long, ("pep", 1), max_chars=cap)
    first = read_claims(long[:cap], ("pep", 1), max_chars=cap)
    assert (claims.replaces, claims.replaced_by, claims.between) == (
        first.replaces,
        first.replaced_by,
        first.between,
    )
    assert claims.capped == (cap if len(long) > cap else None)
    count, _ = events(lambda: read_claims(long, ("pep", 1), max_chars=cap))
    assert count <= EVENTS_PER_BYTE * cap + EVENTS_FIXED


def test_a_proposal_says_when_a_body_was_read_only_up_to_the_cap() -> None:
    def doc(name: str, title: str, body: str):  # type: ignore[no-untyped-def]
        fields = {"doc_id": f"hb:{name}", "source": "hb", "family": f"hb:{name}"}
        fields |= {"title": title, "path": f"{name}.md", "body": body}
        return profile(doc_class=None, effective_from=None, **fields)

    text = "Meals when travelling: up to 40 EUR a day, with receipts. "
    long = text * (MAX_CHARS // len(text) + 2)
    found = discover([doc("pricing-2020", "Pricing 2020", long), doc("pricing", "Pricing", text)])
    assert found.links
    evidence = found.links[0].evidence
    assert f"claims read from the first {MAX_CHARS:,} characters of pricing-2020 only" in evidence
