"""What a connector read, screened against what the stores can hold: one rule for every source.

A document is a finding, never a crash, when it cannot be represented: a NUL character (which
PostgreSQL's text and JSONB refuse), a version beyond the table's integer, an id or a class
longer than its column. A field that cannot be held is taken as absent (a registered document
keeps its registered value for it, as for any unreadable field); a document whose *identity*
cannot be held is set aside like a file that does not parse (a registered one keeps its state
through its path). Problem messages are made storable too, so one hostile note never stops a
run, on SQLite or on PostgreSQL.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from reconciler.model import (
    ProblemKind,
    SourceDocument,
    SourceProblem,
    SourceSnapshot,
    storable,
)

#: The table's limits (``stores/sql/schema.py``): ids live in 512-character columns beside the
#: source's name, classes in 128, versions in a 32-bit integer, paths in 1,024.
KEY_MAX = 256
FAMILY_MAX = 256
CLASS_MAX = 128
TITLE_MAX = 4096
PATH_MAX = 1024
VERSION_MAX = 2**31 - 1
#: How much of a bad value a message quotes.
QUOTE_MAX = 80


def _too_much(value: str, limit: int) -> str | None:
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (a lone surrogate)"
    if len(value) > limit:
        return f"is {len(value)} characters long (at most {limit})"
    return None


def _quoted(value: object) -> str:
    text = storable(repr(value) if not isinstance(value, str) else repr(value[:QUOTE_MAX]))
    return text if len(text) <= QUOTE_MAX + 10 else text[: QUOTE_MAX + 7] + "..."


def screen(snapshot: SourceSnapshot) -> SourceSnapshot:
    """The snapshot with every value the stores can hold, and a problem for each that they
    cannot (see the module docstring)."""
    problems = [_storable_problem(p) for p in snapshot.problems]
    documents = []
    for doc in snapshot.documents:
        path = doc.path if doc.path is not None and not _too_much(doc.path, PATH_MAX) else None
        identity = _too_much(doc.source_key, KEY_MAX) or (
            _too_much(doc.doc_id, 2 * KEY_MAX) and "is too long or contains a NUL character"
        )
        if identity is not None:
            problems.append(
                SourceProblem(
                    source=doc.source,
                    kind=ProblemKind.INVALID_FIELD,
                    message=f"id {_quoted(doc.source_key)} {identity}: the document cannot be "
                    "stored and is set aside",
                    path=storable(path) if path else None,
                    field="id",
                )
            )
            continue
        checks: Mapping[str, tuple[Any, int]] = {
            "family": (doc.family, FAMILY_MAX),
            "doc_class": (doc.doc_class, CLASS_MAX),
            "title": (doc.title, TITLE_MAX),
            "superseded_by": (doc.superseded_by, 2 * KEY_MAX),
        }
        dropped: dict[str, Any] = {}
        for name, (value, limit) in checks.items():
            why = _too_much(value, limit) if isinstance(value, str) else None
            if why is not None:
                dropped[name] = None
                problems.append(_field_problem(doc, name, f"{name} {why}"))
        if doc.version is not None and not 0 <= doc.version <= VERSION_MAX:
            dropped["version"] = None
            problems.append(
                _field_problem(
                    doc, "version", f"version {_quoted(doc.version)} is beyond {VERSION_MAX}"
                )
            )
        if path != doc.path:
            dropped["path"] = path
        documents.append(dataclasses.replace(doc, **dropped) if dropped else doc)
    return dataclasses.replace(snapshot, documents=tuple(documents), problems=tuple(problems))


def _field_problem(doc: SourceDocument, name: str, why: str) -> SourceProblem:
    return SourceProblem(
        source=doc.source,
        kind=ProblemKind.INVALID_FIELD,
        message=f"{why}; taken as absent",
        path=storable(doc.path) if doc.path else None,
        doc_id=doc.doc_id,
        source_key=doc.source_key,
        field=name,
    )


def _storable_problem(problem: SourceProblem) -> SourceProblem:
    """A connector's problem with NULs spelled out; one naming an unstorable id loses it."""
    changes: dict[str, Any] = {}
    for name in ("message", "path"):
        value = getattr(problem, name)
        if isinstance(value, str) and storable(value) != value:
            changes[name] = storable(value)
    for name, limit in (("doc_id", 2 * KEY_MAX), ("source_key", KEY_MAX)):
        value = getattr(problem, name)
        if isinstance(value, str) and _too_much(value, limit):
            changes[name] = None
    return dataclasses.replace(problem, **changes) if changes else problem
