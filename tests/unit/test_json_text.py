"""``--format json``'s text (``reconciler.cli.group.json_text``): the values ``json.dumps``
writes, laid out a record a line, by the C encoder; and the collector's setting a bulk
command works under (``bulk_work``), restored after it."""

from __future__ import annotations

import gc
import json
from datetime import UTC, datetime
from typing import Any
from unittest.mock import patch

from hypothesis import given
from hypothesis import strategies as st

from reconciler.cli import group
from reconciler.cli.group import CliState, bulk_work, json_pieces, json_text

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), VALUES, max_size=6))
def test_the_same_json_as_dumps(data: dict[str, object]) -> None:
    text = json_text(data)
    assert json.loads(text) == json.loads(json.dumps(data, indent=2))
    # The same tokens in the same order: only the whitespace between them differs.
    assert json.dumps(json.loads(text)) == json.dumps(data)


def test_a_record_a_line_the_rest_indented() -> None:
    data = {
        "run_id": None,
        "findings": [{"check": "family", "expected": {"a": [1, 2]}}, {"check": "dates"}],
        "writes": {"table": 2},
        "at": datetime(2026, 1, 2, tzinfo=UTC),
        "skipped": [],
        3: "a key that is not text",
    }
    assert json_text(data).splitlines() == [
        "{",
        '  "run_id": null,',
        '  "findings": [',
        '    {"check": "family", "expected": {"a": [1, 2]}},',
        '    {"check": "dates"}',
        "  ],",
        '  "writes": {',
        '    "table": 2',
        "  },",
        '  "at": "2026-01-02 00:00:00+00:00",',
        '  "skipped": [],',
        '  "3": "a key that is not text"',
        "}",
    ]


def test_bulk_work_sets_aside_what_survives_and_hands_it_back() -> None:
    callbacks = list(gc.callbacks)
    assert gc.get_freeze_count() == 0
    with bulk_work():
        kept = [[n] for n in range(1000)]
        gc.collect(0)
        assert gc.get_freeze_count() >= len(kept)  # survivors set aside, not looked at again
    assert gc.get_freeze_count() == 0
    assert gc.callbacks == callbacks


def test_bulk_work_runs_no_collection_and_restores_the_collector() -> None:
    assert gc.isenabled()
    with bulk_work():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with bulk_work():
            pass
        assert not gc.isenabled()  # (a caller's choice stands)
    finally:
        gc.enable()


def _joined(data: Any, indent: str = "") -> str:
    """``json_text`` as it was before it came in pieces (``json_pieces``): the reference."""
    inner = indent + "  "
    if isinstance(data, dict) and data:
        items = [f"{json.dumps(str(k) if not isinstance(k, str) else k)}: {_joined(v, inner)}"
                 for k, v in data.items()]  # fmt: skip
    elif isinstance(data, list | tuple) and data:
        items = [json.dumps(v) if isinstance(v, dict) else _joined(v, inner) for v in data]
    else:
        return json.dumps(data)
    opening, closing = ("{", "}") if isinstance(data, dict) else ("[", "]")
    return f"{opening}\n{inner}" + f",\n{inner}".join(items) + f"\n{indent}{closing}"


@given(st.dictionaries(st.text(), VALUES, max_size=6))
def test_the_pieces_are_the_text_it_was(data: dict[str, object]) -> None:
    assert "".join(json_pieces(data)) == json_text(data) == _joined(data)


@given(st.dictionaries(st.text(), VALUES, max_size=6), st.integers(1, 64))
def test_emit_writes_the_text_in_batches(data: dict[str, object], batch: int) -> None:
    state = CliState(config=None, fmt="json")
    with patch.object(group, "_BATCH", batch), patch.object(group.click, "echo") as echo:
        state.emit(data, lambda _: "")
    written = "".join(c.args[0] + ("" if c.kwargs.get("nl") is False else "\n")
                      for c in echo.call_args_list)  # fmt: skip
    assert written == json_text(data) + "\n"
