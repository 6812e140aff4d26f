"""The promise of ``reconciler declare``, as a property over random adopted corpora (documents
no configured source holds, in random states and dates, each its own family) and random
decisions (links in any direction, cycles and dead ends among them, families):

- decisions that cannot be declared are refused whole, and nothing is written anywhere;
- otherwise, after the ``declare`` run, ``check`` finds nothing to write and a second ``run``
  writes nothing (the declarations are a fixed point of the engine);
- a declaration never leaves a family with nothing servable: every document served before is
  in a family that still serves a version now;
- ``rollback`` of the declare run puts every row's fields and every chunk's payload back as
  they were, and nothing brings the declarations back.

Through the CLI, on SQLite and Qdrant local mode.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml
from acceptance_kit import Deployment, body, day, migrated_sqlite
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

from reconciler.model import MANAGED_KEYS

STATUS = st.sampled_from((None, None, "current", "retired", "draft", "superseded"))
NOTE = st.tuples(STATUS, st.one_of(st.none(), st.integers(min_value=-900, max_value=60)))


@contextmanager
def adopted(notes: list[tuple[str | None, int | None]]) -> Iterator[Deployment]:
    root = Path(tempfile.mkdtemp(prefix="declare-property-"))
    try:
        shutil.copy(migrated_sqlite(), root / "reconciler.db")
        deploy = Deployment(root)
        for n, (status, start) in enumerate(notes):
            deploy.note(
                f"n{n}",
                body(f"note {n}", f"The text of note {n}."),
                status=status,
                effective_from=day(start) if start is not None else None,
            )
        deploy.init_ingest()
        assert deploy.json("run")[0] == 0
        deploy.config.write_text(
            deploy.config.read_text(encoding="utf-8").replace(
                '[[sources]]\nname = "hb"\ntype = "vault"\npath = "vault"\n', ""
            ),
            encoding="utf-8",
        )
        yield deploy
    finally:
        shutil.rmtree(root, ignore_errors=True)


def state(deploy: Deployment) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each row's managed fields, each point's managed payload."""
    fields = ("doc_family_id", "doc_version", "version_state", "superseded_by",
              "effective_from", "effective_to", "doc_class", "quarantined")  # fmt: skip
    rows = {k: {f: r[f] for f in fields} for k, r in deploy.rows().items()}
    payloads = {
        pid: {k: p.get(k) for k in MANAGED_KEYS} for pid, p in deploy.points().payloads.items()
    }
    return rows, payloads


def proposals(links: list[tuple[int, int]], families: list[list[int]]) -> dict[str, Any]:
    items: list[dict[str, Any]] = [
        {"id": f"link-{n}", "kind": "link", "older": f"hb:n{a}", "newer": f"hb:n{b}",
         "direction": "older -> newer", "score": 0.8, "evidence": "drawn", "decision": "accept"}
        for n, (a, b) in enumerate(links)
    ]  # fmt: skip
    items += [
        {"id": f"family-{n}", "kind": "family", "members": [f"hb:n{m}" for m in members],
         "links": [], "score": 0.8, "evidence": "drawn", "decision": "accept"}
        for n, members in enumerate(families)
    ]  # fmt: skip
    return {"format": "reconciler-proposals/1", "proposals": items}


@st.composite
def cases(
    draw: st.DrawFn,
) -> tuple[list[tuple[str | None, int | None]], list[tuple[int, int]], list[list[int]]]:
    notes = draw(st.lists(NOTE, min_size=2, max_size=5))
    n = len(notes)
    index = st.integers(min_value=0, max_value=n - 1)
    links = draw(st.lists(st.tuples(index, index).filter(lambda p: p[0] != p[1]), max_size=4))
    families = draw(st.lists(st.lists(index, min_size=2, max_size=3, unique=True), max_size=1))
    return notes, links, families


@settings(max_examples=examples(8), suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(cases())
# a chain declared into a version that starts later, one whose successor is a draft
@example(([(None, -300), ("current", -100), (None, 30)], [(0, 1), (1, 2)], []))
@example(([(None, -300), (None, -100), ("draft", None)], [(0, 1), (1, 2)], [[0, 2]]))
# a successor superseded with no successor of its own: refused, nothing written
@example(([(None, -300), ("superseded", -100)], [(0, 1)], []))
def test_declarations_are_a_fixed_point_that_rollback_undoes(
    case: tuple[list[tuple[str | None, int | None]], list[tuple[int, int]], list[list[int]]],
) -> None:
    notes, links, families = case
    if not links and not families:
        return
    with adopted(notes) as deploy:
        before = state(deploy)
        served_before = deploy.served()
        reviewed = deploy.root / "reviewed.yaml"
        reviewed.write_text(yaml.safe_dump(proposals(links, families)), encoding="utf-8")
        tables = {k: v for k, v in deploy.dump().items() if k != "leases"}

        result = deploy.cli("--format", "json", "declare", str(reviewed))
        if result.exit_code == 1:  # refused whole: nothing written anywhere
            assert "cannot be recorded" in result.output
            assert {k: v for k, v in deploy.dump().items() if k != "leases"} == tables
            assert state(deploy) == before
            return
        assert result.exit_code == 0, result.output
        done = json.loads(result.stdout)
        assert done["declarations"]

        code, checked = deploy.json("check")
        assert checked["plan"]["rows"] == [], checked
        assert checked["plan"]["payloads"] == [], checked
        code, again = deploy.json("run")
        assert code == 0
        assert all(v == 0 for v in again["writes"].values()), again

        rows = state(deploy)[0]
        served = deploy.served()
        for doc_id in served_before:
            family = rows[doc_id]["doc_family_id"]
            members = {d for d, r in rows.items() if r["doc_family_id"] == family}
            assert members & served, f"{family} ({sorted(members)}) serves nothing now"

        code, undone = deploy.json("rollback", done["run_id"])
        assert code == 0, undone
        assert state(deploy) == before
        assert deploy.json("run")[0] == 0
        assert state(deploy) == before
        assert deploy.served() == served_before
