"""Issue 34, as a property: over random vaults (families or single notes, in folders or not)
and random id-scheme changes (each note's id read from its ``ref`` from now on, or still its
path), after ``reconciler rekey`` and the ``run`` after it no note is ever served under two
ids, each is served under the id its source now gives it, and the notes served are the notes
served before the change (a point keeps its id through a re-keying, so it names its note)."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from acceptance_kit import Deployment, Points, body, day
from hypothesis import example, given, settings
from hypothesis import strategies as st
from hypothesis_kit import examples

from reconciler import default_filter

REF_IDS = '[sources.options.fields]\nid = "ref"'
#: A note: its family (or none), whether its id changes, whether it sits in a folder, whether
#: the next note supersedes it (in whatever family that one is).
NOTE = st.tuples(st.sampled_from([None, "f0", "f1"]), st.booleans(), st.booleans(), st.booleans())
Note = tuple[str | None, bool, bool, bool]


@contextmanager
def vault(notes: list[Note]) -> Iterator[tuple[Deployment, dict[str, str]]]:
    """The notes ingested and reconciled under path ids; yields the deployment and each
    note's id after the change (by its path id)."""
    root = Path(tempfile.mkdtemp(prefix="rekey-property-"))
    try:
        deploy = Deployment(root)
        after: dict[str, str] = {}
        version: dict[str, int] = {}
        names = [f"d{n % 2}/n{n}" if note[2] else f"n{n}" for n, note in enumerate(notes)]
        for n, (family, renamed, _nested, replaced) in enumerate(notes):
            name = names[n]
            if family is not None:
                version[family] = version.get(family, 0) + 1
            successor = names[n + 1] if replaced and n + 1 < len(notes) else None
            deploy.note(
                name,
                body(f"note {n}", f"Text of note {n}."),
                ref=f"R-{n}" if renamed else None,
                family=family,
                status="superseded" if successor else "current",
                superseded_by=successor.rsplit("/", 1)[-1] if successor else None,
                version=str(version[family]) if family is not None else None,
                effective_from=day(-300 + 10 * n),
            )
            after[f"hb:{name}"] = f"hb:R-{n}" if renamed else f"hb:{name}"
        deploy.init_ingest()
        assert deploy.json("run")[0] == 0
        code, data = deploy.json("run")  # (what is left to say once the first has repaired)
        assert code == 0, data
        deploy.kinds = sorted(f"{f['check']}/{f['kind']}" for f in data["findings"])  # type: ignore[attr-defined]
        yield deploy, after
    finally:
        shutil.rmtree(root, ignore_errors=True)


def served(deploy: Deployment, first: Points) -> dict[str, set[str]]:
    """Each note served (named by its first id) and the ids it is served under."""
    ids: dict[str, set[str]] = {}
    for pid, payload in deploy.points(default_filter()).payloads.items():
        ids.setdefault(first.payloads[pid]["doc_id"], set()).add(payload["doc_id"])
    return ids


@settings(max_examples=examples(4), deadline=None)
# (a change that reads no note's ref is a mapping nobody uses: a finding of its own)
@given(st.lists(NOTE, min_size=1, max_size=5).filter(lambda notes: any(n[1] for n in notes)))
# a family whose older version changes id and whose newer one keeps its path id
@example([("f0", True, False, False), ("f0", False, True, False), (None, True, True, False)])
# a note superseded by a note of another family whose id changes (its payload names it)
@example([("f0", False, False, True), ("f1", True, False, False)])
def test_after_rekey_every_note_is_served_once_under_its_new_id(notes: list[Note]) -> None:
    with vault(notes) as (deploy, after):
        first = deploy.points()
        before = served(deploy, first)
        assert all(len(ids) == 1 for ids in before.values())
        deploy.configure(source_extra=REF_IDS)

        code, done = deploy.json("rekey")
        assert code == 0, done
        assert {p["old_id"]: p["new_id"] for p in done["pairs"]} == {
            old: new for old, new in after.items() if old != new
        }
        gone = {old for old, new in after.items() if old != new}
        for pid, payload in deploy.points().payloads.items():  # no payload names an old id
            assert not {payload["doc_id"], payload.get("superseded_by")} & gone, (pid, payload)
            assert payload["chunk_id"].startswith(payload["doc_id"]), (pid, payload)
        for step in ("rekey", "run"):
            now = served(deploy, first)
            assert set(now) == set(before), step  # the same notes served
            assert now == {note: {after[note]} for note in before}, step  # once, as named now
            if step == "rekey":
                code, data = deploy.json("run")
                assert code == 0, data
                # what the run says is what it said before the change (a family with two
                # versions declared current, say), with nothing missing, new or pending
                found = sorted(f"{f['check']}/{f['kind']}" for f in data["findings"])
                assert found == deploy.kinds, data["findings"]  # type: ignore[attr-defined]
        assert set(deploy.rows()) == set(after.values())
