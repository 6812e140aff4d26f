"""A chunk that holds a JSON object, or lists in lists, where a managed value belongs (another
writer's, e.g. ``{"$date": ...}`` for an instant) is drift the check reports and apply mends,
never a crash of the scan: ``normalize`` keeps such a value hashable (``FrozenObject``,
tuples), whether the chunk has a row or not; a doc_id that is a number is an orphan's,
reported and quarantined. On a real SQLite table and the in-memory index."""

from __future__ import annotations

import json
from typing import Any

from acceptance_kit import memory_engine, one_chunk_doc

from reconciler.payload import FrozenObject, chunk_payload, normalize
from reconciler.pipeline.values import Guard, Options


def test_an_object_where_a_value_belongs_is_drift_reported_and_mended() -> None:
    docs = [one_chunk_doc("a"), one_chunk_doc("b")]
    odd: list[dict[str, Any]] = [
        {**chunk_payload(docs[0], chunk_id="kb:a#0"), "effective_to": {"$date": "2030-01-01"}},
        {**chunk_payload(docs[1], chunk_id="kb:b#0"), "doc_class": [["policy"], {"k": [1]}]},
        {**chunk_payload(docs[1], chunk_id="kb:gone#0"), "doc_id": "kb:gone",
         "version_state": {"state": "current"}, "doc_family_id": {"f": [1]}},
        {**chunk_payload(docs[1], chunk_id="kb:x#0"), "doc_id": 7},
    ]  # fmt: skip
    with memory_engine(docs, odd) as runner:
        checked = runner.run(Options(mode="check"))
        kinds = {(f.check, f.doc_id) for f in checked.findings}
        assert ("payload", "kb:a") in kinds
        assert ("payload", "kb:b") in kinds
        # A chunk whose doc_id is a number names no row: an orphan without a doc_id
        # (``doc_id_of``; the guard sorts it with the documents a plan would hide).
        orphans = {f.doc_id for f in checked.findings if f.kind == "orphan_chunks"}
        assert {"kb:gone", None} <= orphans
        json.dumps([f.to_json() for f in checked.findings])  # (it prints)

        runner.run(Options(mode="apply", guard=Guard(max_changed_fraction=1.0)))
        again = runner.run(Options(mode="check"))
        assert not {f.doc_id for f in again.findings} & {"kb:a", "kb:b"}


def test_normalize_keeps_objects_and_nested_lists_hashable_and_as_they_read() -> None:
    found = normalize({"doc_class": [["a"], {"b": [1, {"c": 2}]}], "effective_to": {"$d": "x"}})
    values = dict(found)

    hash(found)  # (a variant is counted in a dict)
    assert values["doc_class"] == (("a",), {"b": (1, {"c": 2})})
    assert isinstance(values["effective_to"], FrozenObject)
    assert json.loads(json.dumps(values["effective_to"])) == {"$d": "x"}
    assert normalize({"effective_to": {"$d": "x"}}) == normalize({"effective_to": {"$d": "x"}})
    assert hash(normalize({"doc_class": {"a": 1, "b": 2}})) == hash(
        normalize({"doc_class": {"b": 2, "a": 1}})
    )
