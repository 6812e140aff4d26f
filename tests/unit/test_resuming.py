"""What a polled source changed while serve was down, by its rows: a declared change is one,
what the time rule derives is not, and a long token is kept as its hash."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

from reconciler.app.resuming import MARK_LENGTH, asked_with, drifted, mark_of
from reconciler.model import Document, SourceDocument, VersionState

NOW = datetime(2026, 6, 1, tzinfo=UTC)
START = datetime(2026, 1, 1, tzinfo=UTC)


def _doc(key: str, **fields: object) -> SourceDocument:
    base: dict[str, object] = {
        "source": "reg", "source_key": key, "doc_id": f"reg:{key}", "content_hash": "sha256:1",
        "family": "f", "state": VersionState.CURRENT, "effective_from": START,
    }  # fmt: skip
    return SourceDocument(**{**base, **fields})  # type: ignore[arg-type]


def _row(key: str, **fields: object) -> Document:
    base: dict[str, object] = {
        "doc_id": f"reg:{key}", "source": "reg", "source_key": key, "doc_family_id": "reg:f",
        "doc_version": 1, "version_state": VersionState.CURRENT, "effective_from": START,
        "source_hash": "sha256:1",
    }  # fmt: skip
    return Document(**{**base, **fields})  # type: ignore[arg-type]


def test_declared_changes_are_found_and_derived_states_are_not() -> None:
    docs = [
        _doc("same"),
        _doc("retired", state=VersionState.RETIRED),
        _doc("edited", content_hash="sha256:2"),
        _doc("moved", family="g"),
        _doc("new"),
        _doc("older"),  # the row superseded by its family's order: the time rule's
    ]
    rows = {
        key: _row(key)
        for key in ("same", "retired", "edited", "moved", "gone", "gone-retired", "older")
    }
    rows["gone-retired"] = dataclasses.replace(
        rows["gone-retired"], version_state=VersionState.RETIRED
    )
    rows["older"] = dataclasses.replace(rows["older"], version_state=VersionState.SUPERSEDED)
    found = drifted("reg", docs, rows, now=NOW)
    assert found == {"retired", "edited", "moved", "new", "gone"}


def test_a_long_token_is_kept_as_its_hash_and_not_sent_back() -> None:
    short = 'etag:"abc"'
    assert mark_of(short) == short
    assert asked_with(mark_of(short)) == short
    long = "etag:" + "x" * MARK_LENGTH
    kept = mark_of(long)
    assert kept is not None
    assert len(kept) <= MARK_LENGTH
    assert kept != long
    assert asked_with(kept) is None
    assert mark_of(None) is None
