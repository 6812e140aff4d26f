"""``family``, source-wide: a source that yields nothing, or nothing but ``unknown`` versions.

Both look like success from inside a run: a vault path with no ``*.md`` under it reads as an
empty corpus that agrees with an empty table, and a status the connector cannot map serves
every document as ``unknown``, which the default filter admits. Neither is drift a write could
repair (the configuration is wrong, or the source), so these findings carry no write; they
say what to check. A source that held documents and returns none is the guard's
(``guard/source_empty``): it refuses the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime

from reconciler.check_inputs import SourceState
from reconciler.model import Finding, Severity, SourceDocument, SourceProblem, VersionState
from reconciler.rules.declared_state import declared_state

CHECK = "family"


def check_source_yield(
    states: Mapping[str, SourceState],
    documents: Iterable[SourceDocument],
    rows_by_source: Mapping[str, int],
    now: datetime,
    problems: Mapping[str, Iterable[SourceProblem]] | None = None,
) -> list[Finding]:
    """For each source read completely: it yielded no document while the table holds none of
    its (``family/source_empty``), or every document it yielded declares no state
    (``family/all_unknown``). ``rows_by_source``: each source's rows not retired;
    ``problems``: doc_id -> what the connector reported of it (a status it could not read is
    one declared, not none)."""
    seen: Counter[str] = Counter()
    unknown: Counter[str] = Counter()
    for doc in documents:
        seen[doc.source] += 1
        if declared_state(doc, as_of=now) is VersionState.UNKNOWN and not any(
            p.field == "state" for p in (problems or {}).get(doc.doc_id, ())
        ):
            unknown[doc.source] += 1
    findings = []
    for name, state in sorted(states.items()):
        if not (state.scanned and state.readable and state.complete) or state.scoped:
            continue  # unread, or read in part (the hash check's source_unreadable), or at
            # some paths only (the watch's run: no count of the whole source)
        if state.documents == 0 and not rows_by_source.get(name):
            findings.append(
                Finding(
                    check=CHECK,
                    kind="source_empty",
                    severity=Severity.WARNING,
                    family=None,
                    doc_id=None,
                    expected={"source": name, "documents": "at least 1"},
                    actual={"source": name, "documents": 0, "registered": 0},
                    action=(
                        "none: nothing is registered from it; check its [[sources]] entry: the "
                        "path (or url, query, space) and what it includes (the vault connector "
                        "reads *.md files under path, the git connector its include globs); "
                        "remove the entry if the source is empty on purpose"
                    ),
                )
            )
        elif seen[name] and unknown[name] == seen[name]:
            findings.append(
                Finding(
                    check=CHECK,
                    kind="all_unknown",
                    severity=Severity.WARNING,
                    family=None,
                    doc_id=None,
                    expected={"source": name, "declared": "states for some documents"},
                    actual={"source": name, "documents": seen[name], "unknown": unknown[name]},
                    action=(
                        "none: every document is served as unknown, in force by the time rule "
                        "alone (the latest of each family); check the status mapping: "
                        "`reconciler vocabulary check` shows what each reader reads of each "
                        "document, and where a status is written but not read"
                    ),
                )
            )
    return findings
