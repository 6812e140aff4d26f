"""A reviewed proposals file is read as a file nobody vouches for (``reconciler.discovery``'s
``safe_yaml`` and ``reviewed``): an alias bomb, a key given twice, a binary file, a deep
nesting, a wrong type, are each a problem named by line, never a traceback, a hang or a value
chosen silently; and what is well-formed is read as PyYAML's safe loader reads it."""

from __future__ import annotations

import copy
import string
from pathlib import Path
from typing import Any

import hypothesis_kit
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.discovery import ProposalsError, discover, load_reviewed, profile, read_proposals
from reconciler.discovery.lookalikes import shown, skeleton, unusual
from reconciler.discovery.reviewed import EVIDENCE_MAX
from reconciler.discovery.safe_yaml import MAX_DEPTH, UnsafeYaml, load_text, text_of

LAUGHS = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n"
    for a, b in zip("abcdefgh", "bcdefghi", strict=False)
)


def reviewed(tmp_path: Path) -> tuple[Path, str]:
    """A file ``suggest`` writes (``discover``'s ``as_dict`` dumped as ``suggest -o`` does),
    its first link accepted."""
    found = discover(
        [
            profile(
                doc_id=f"hb:{name}",
                source="hb",
                family=f"hb:{name}",
                doc_class=None,
                title=title,
                path=f"{name}.md",
                effective_from=None,
                body=f"The text of {title}.",
            )
            for name, title in (("pricing-2020", "Pricing 2020"), ("pricing", "Pricing 2021"))
        ]
    )
    data = found.as_dict()
    data["proposals"][0]["decision"] = "accept"
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    path = tmp_path / "reviewed.yaml"
    path.write_text(text, encoding="utf-8")
    return path, text


def problems_of(path: Path) -> tuple[str, ...]:
    with pytest.raises(ProposalsError) as caught:
        load_reviewed(path)
    return caught.value.problems


def test_a_billion_laughs_is_refused_as_it_is_read_not_expanded() -> None:
    with pytest.raises(UnsafeYaml) as caught:
        load_text(LAUGHS)
    assert "line 1: the anchor &a: anchors and aliases are refused" in caught.value.problems
    assert "line 2: the alias *a: aliases are refused" in caught.value.problems


def test_a_key_given_twice_is_refused_with_its_line(tmp_path: Path) -> None:
    path, text = reviewed(tmp_path)
    lines = text.splitlines()
    at = next(n for n, line in enumerate(lines) if "decision: accept" in line)
    lines[at:at] = [lines[at].replace("accept", "reject")]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert problems_of(path) == (f"line {at + 2}: the key 'decision' a second time in one mapping",)


def test_every_wrong_type_is_listed_at_once_with_its_line(tmp_path: Path) -> None:
    path, text = reviewed(tmp_path)
    text = text.replace("min_score: 0.7", "min_score: abc").replace(
        "documents: 2", "documents: [1, 2]"
    )
    text = text.replace("decision: accept", "decison: accept", 1)
    path.write_text(text, encoding="utf-8")
    found = problems_of(path)
    lines = text.splitlines()

    def line(fragment: str) -> int:
        return next(n + 1 for n, text in enumerate(lines) if fragment in text)

    assert len(found) == 3, found
    assert found[0].startswith(f"line {line('min_score')}: min_score: ")
    assert "'abc'" in found[0]
    assert found[1].startswith(f"line {line('documents')}: documents: ")
    assert found[2] == (
        f"line {line('decison')}: proposals[0].decison: not a field of a proposals file (misspelt?)"
    )


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"format: x\n\x00\x01\x02", "line 2: a NUL byte (offset 10): a binary file, not text"),
        (b"format: x\nnotes: [\xff\xfe]\n", "line 2: not UTF-8 text (byte 0xff at offset 18)"),
        (b"[" * 20_000 + b"]" * 20_000, "line 1: not valid YAML: exceeded maximum nesting depth"),
        (b"", "expected a mapping with 'format' and 'proposals', found an empty file"),
        (b"- 1\n- 2\n", "expected a mapping with 'format' and 'proposals', found a list of 2"),
        (b"a: !!python/object:os.system x\n", "line 1: the tag tag:yaml.org,2002:python"),
        (b"a: 1\n---\nb: 2\n", "line 2: a second YAML document: one is read"),
    ],
)
def test_a_file_that_is_not_a_proposals_file_is_one_clear_problem(
    tmp_path: Path, raw: bytes, expected: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_bytes(raw)
    assert problems_of(path)[0].startswith(expected)


def test_nesting_past_the_limit_is_refused_by_the_reader_itself() -> None:
    deep = "".join("  " * n + "a:\n" for n in range(MAX_DEPTH + 5)) + "  " * (MAX_DEPTH + 5) + "1\n"
    with pytest.raises(UnsafeYaml) as caught:
        load_text(deep)
    assert caught.value.problems == (
        f"line {MAX_DEPTH + 1}: nested deeper than {MAX_DEPTH} levels; the rest of this branch "
        "was not read",
    )
    # what follows the branch not read is read as it is: one problem, not a cascade
    with pytest.raises(UnsafeYaml) as caught:
        load_text("a: " + "[" * 40 + "]" * 40 + "\nb: 1\nb: 2\n")
    assert caught.value.problems == (
        f"line 1: nested deeper than {MAX_DEPTH} levels; the rest of this branch was not read",
        "line 3: the key 'b' a second time in one mapping",
    )


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path, _ = reviewed(tmp_path)
    with pytest.raises(ProposalsError) as caught:
        load_reviewed(path, max_bytes=100)
    assert caught.value.problems[0].endswith("bytes; at most 100 are read")
    with pytest.raises(UnsafeYaml):
        text_of(b"x" * 101, max_bytes=100)


def test_an_evidence_past_its_limit_and_repeated_ids_are_problems(tmp_path: Path) -> None:
    path, text = reviewed(tmp_path)
    data = yaml.safe_load(text)
    data["proposals"][0]["evidence"] = "x" * (EVIDENCE_MAX + 1)
    data["proposals"].append(copy.deepcopy(data["proposals"][1]))
    path.write_text(yaml.safe_dump(data, sort_keys=False, width=10**9), encoding="utf-8")
    found = problems_of(path)
    assert len(found) == 1, found
    assert "proposals[0].evidence: String should have at most 10000 characters" in found[0]
    del data["proposals"][0]["evidence"]
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    [again] = problems_of(path)
    assert "proposals[2].id:" in again
    assert "again (first at proposals[1])" in again


def test_a_reviewed_file_reads_back_what_suggest_wrote(tmp_path: Path) -> None:
    path, text = reviewed(tmp_path)
    back = load_reviewed(path)
    assert back == read_proposals(yaml.safe_load(text))
    assert back.proposals[0].decision == "accept"


# -- the promises, as properties ----------------------------------------------------------------

scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False)
    | st.text(max_size=20)
)
keys = st.text(string.ascii_letters + string.digits + "_- ", min_size=1, max_size=12)
documents = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=hypothesis_kit.examples(200))
@given(documents, st.sampled_from([None, "'", '"']), st.booleans())
def test_well_formed_yaml_is_read_as_the_safe_loader_reads_it(
    data: Any, style: str | None, flow: bool
) -> None:
    text = yaml.safe_dump(data, default_style=style, default_flow_style=flow, allow_unicode=True)
    assert load_text(text).data == yaml.safe_load(text)


@settings(max_examples=hypothesis_kit.examples(300))
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_bytes_are_read_or_refused_with_problems_never_a_traceback(raw: bytes) -> None:
    problems: tuple[str, ...] = ()
    try:
        load_text(text_of(raw))
    except UnsafeYaml as exc:
        problems = exc.problems or ("(none listed)",)
    assert all(isinstance(p, str) and p and p != "(none listed)" for p in problems)


@settings(max_examples=hypothesis_kit.examples(100))
@given(documents, st.integers(0, 5), st.sampled_from(["&x ", "*x", "&anchor "]))
def test_an_anchor_or_an_alias_anywhere_refuses_the_file(data: Any, at: int, mark: str) -> None:
    lines = yaml.safe_dump({"top": data}, default_flow_style=False).splitlines()
    line = lines[min(at, len(lines) - 1)]
    if ":" in line:
        head, _, tail = line.partition(":")
        lines[min(at, len(lines) - 1)] = f"{head}: {mark}{tail.strip() or 'v'}"
    else:
        lines.append(f"extra: {mark}v")
    text = "\n".join(lines) + "\n"
    with pytest.raises(UnsafeYaml) as caught:
        load_text(text)
    assert any("refused" in p or "not valid YAML" in p for p in caught.value.problems)


@settings(max_examples=hypothesis_kit.examples(100))
@given(st.lists(st.tuples(keys, scalars), min_size=1, max_size=6), st.data(), st.booleans())
def test_a_key_twice_in_any_mapping_refuses_the_file(
    pairs: list[tuple[str, Any]], data: st.DataObject, nested: bool
) -> None:
    key = data.draw(st.sampled_from([k for k, _ in pairs]))
    at = data.draw(st.integers(0, len(pairs)))
    lines = [yaml.safe_dump({k: v}, width=10**6).rstrip("\n") for k, v in pairs]
    lines.insert(at, yaml.safe_dump({key: "again"}).rstrip("\n"))
    if nested:  # the mapping is an item of a list, under a key
        lines = ["outer:", *(("- " if n == 0 else "  ") + line for n, line in enumerate(lines))]
    with pytest.raises(UnsafeYaml) as caught:
        load_text("\n".join(lines) + "\n")
    assert any("a second time in one mapping" in p for p in caught.value.problems)


# -- look-alike ids -----------------------------------------------------------------------------


def test_a_look_alike_id_is_shown_apart_and_named_and_its_skeleton_is_the_real_id() -> None:
    real = "hb:policy"
    for fake in ("hb:p\u043elicy", "hb:pol\u200bicy", "hb:\u0440olicy", "hb:policy\u00ad"):
        assert fake != real
        assert skeleton(fake) == real
        assert shown(fake) != shown(real)
        assert unusual(fake)
    assert unusual("hb:p\u043elicy") == ["U+043E CYRILLIC SMALL LETTER O at position 4"]
    assert unusual("hb:pol\u200bicy") == ["U+200B ZERO WIDTH SPACE at position 6 (invisible)"]
    assert skeleton(real) == real
    assert unusual(real) == []


#: Plain scalars YAML 1.1 resolves to every kind of value: nulls, booleans, numbers in any
#: base, timestamps (kept as text), merge keys, and words.
plain_tokens = st.sampled_from(
    [
        "~",
        "null",
        "yes",
        "Off",
        "12",
        "0x1F",
        "0o7",
        "1_000",
        "0.7",
        ".inf",
        "-.NaN",
        "1e3",
        "2020-01-01",
        "<<",
        "=",
        "word",
        "b:old-1",
        "0.86",
    ]
) | st.from_regex(r"[a-z0-9][a-z0-9.+_-]{0,4}(:[a-z0-9]{1,3})?", fullmatch=True)


@settings(max_examples=hypothesis_kit.examples(100))
@given(st.lists(plain_tokens, min_size=1, max_size=40), st.integers(1, 5))
def test_a_plain_scalar_is_read_as_its_text_resolves_whatever_was_remembered(
    tokens: list[str], kept: int
) -> None:
    """``_untagged`` remembers the value of each plain text it resolved (emptied at
    ``_PLAIN_KEPT``): a file reads as each of its scalars resolved on its own (``_scalar``),
    however many times a text repeats and however few are remembered."""
    import math  # noqa: PLC0415

    from reconciler.discovery import safe_yaml  # noqa: PLC0415

    text = "".join(f"- {t}\n" for t in tokens)
    alone = [safe_yaml._scalar(e) for e in yaml.parse(text) if isinstance(e, yaml.ScalarEvent)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(safe_yaml, "_PLAIN_KEPT", kept)
        read = load_text(text).data
    assert [(type(v), repr(v)) for v in read] == [(type(v), repr(v)) for v in alone]
    assert all(
        a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(read, alone, strict=True)
    )
