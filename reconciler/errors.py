"""The program's own failures, grouped by what the caller does (drift is a Finding, not this)::

    ReconcilerError                 base
    ├── ConfigError                 fatal: the configuration is wrong; lists every problem
    ├── SchemaError                 fatal: the document table is at a revision this build
    │                               does not know (run a newer build, or restore)
    ├── StoreUnavailable            retry later: a store could not be reached
    │   ├── TableUnavailable
    │   └── IndexUnavailable
    │       └── CollectionMissing   fix the config or ingest: the collection does not exist
    ├── StoreFault                  fix the machine: the store's disk is full, failing or its
    │                               file is corrupt (the transaction was rolled back)
    ├── IndexWriteError             stop the run: a payload batch failed; ``points_written``
    │                               says exactly how far it got (every write is idempotent,
    │                               so the next run converges)
    ├── LeaseBusy                   skip this run: another runner holds the shard's lease
    ├── LeaseLost                   stop writing: the lease was lost during the run (the run
    │                               is failed; what it wrote is audited)
    ├── RollbackRefused             fix the command: later runs changed the same documents
    │                               (roll them back first, or ``--cascade``)
    ├── JobStopped                  stop the run: a serve job passed its deadline, or serve
    │                               is stopping (the run is failed; the next one converges)
    ├── ArchiveRefused              fix the store: a split store's archive collection exists
    │                               and is not the main collection's kind (another vector
    │                               layout); ``split`` moves nothing into it (exit 3)
    ├── AuditUnanswerable           the audit log cannot answer: its chain fails verification,
    │                               or the instant asked about is before its first entry
    ├── NotFound                    fix the command: a scoped repair names no document or
    │                               family that the table or a source knows, or no run has
    │                               the given id (prefix)
    ├── AmbiguousRunId              fix the command: a run id prefix matches several runs
    └── Undeclarable                fix the decisions: a declaration names no document, or
                                    a system of record or an earlier declaration says
                                    otherwise (every problem listed; nothing recorded)

Connector errors live in ``reconciler.ports.source`` (re-exported by ``connectors.base``).
"""

from __future__ import annotations


class ReconcilerError(Exception):
    """Base of the reconciler's own errors."""


class ConfigError(ReconcilerError):
    """The configuration is invalid; ``problems`` lists every (key path, message)."""

    def __init__(self, problems: list[tuple[str, str]], *, origin: str | None = None) -> None:
        self.problems = problems
        self.origin = origin
        where = f" in {origin}" if origin else ""
        lines = [f"{len(problems)} problem(s){where}:"]
        lines += [f"  {path}: {message}" for path, message in problems]
        super().__init__("\n".join(lines))


class DriverMissing(ReconcilerError):
    """The database driver a URL names is not installed (one line: what to install)."""

    #: The pip requirement that brings each driver module.
    PACKAGES = {"psycopg": "psycopg[binary]", "psycopg2": "psycopg2-binary"}

    def __init__(self, module: str | None) -> None:
        module = module or "the database driver"
        package = self.PACKAGES.get(module.split(".")[0], module)
        extra = " (the `postgres` extra: pip install 'corpus-reconciler[postgres]')"
        super().__init__(
            f"the database driver {module!r} is not installed: pip install '{package}'"
            + (extra if package == "psycopg[binary]" else "")
        )


class ExtraMissing(ReconcilerError):
    """A command needs a package of an optional extra that is not installed (one line: the
    command that installs it)."""

    def __init__(self, extra: str, module: str, command: str) -> None:
        super().__init__(
            f"`reconciler {command}` needs {module!r}, which is not installed: "
            f"pip install 'corpus-reconciler[{extra}]'"
        )


class SchemaError(ReconcilerError):
    """The document table's schema revision is unknown to this build."""


class StoreUnavailable(ReconcilerError):
    """A store could not be reached; retry later."""


class TableUnavailable(StoreUnavailable):
    """The document table could not be reached."""


class IndexUnavailable(StoreUnavailable):
    """The chunk index could not be reached."""


class CollectionMissing(IndexUnavailable):
    """The configured collection does not exist: not an outage, retrying will not help; the
    message says what to do (ingest first, or point index.collection at one)."""


class StoreFault(ReconcilerError):
    """A store's disk is full or failing (the document table's, or a Qdrant Edge shard's), or
    its file is corrupt: not a network problem, and retrying will not help until it is
    fixed."""


class IndexWriteError(ReconcilerError):
    """A payload write batch failed part-way through a run."""

    def __init__(self, message: str, *, points_written: int) -> None:
        self.points_written = points_written
        super().__init__(f"{message} (after {points_written} point(s) written)")


class LeaseBusy(ReconcilerError):
    """Another runner holds this shard's single-runner lease: the run was skipped."""


class LeaseLost(ReconcilerError):
    """The single-runner lease was lost during the run: writing stopped before the next batch."""


class RekeyPending(ReconcilerError):
    """An ingestion would register documents under new ids while their old ids are
    registered (a configuration change): ``reconciler rekey`` renames them first."""


class RollbackRefused(ReconcilerError):
    """Later runs changed the same documents; roll them back first (``--cascade``)."""

    def __init__(self, run_id: str, later: list[str], *, rekeyed: bool = False) -> None:
        self.run_id = run_id
        self.later = later
        if rekeyed:  # (a re-keying is undone by its pairs swapped, never inside a cascade)
            super().__init__(
                f"run {run_id} cannot be rolled back: the later run {later[0]} re-keyed "
                f"documents it wrote, and --cascade does not undo a re-keying. Roll back "
                f"{later[0]} first (`reconciler rollback {later[0]}`: the old ids come back), "
                f"then {run_id}"
            )
            return
        super().__init__(
            f"run {run_id} cannot be rolled back on its own: later run(s) "
            f"{', '.join(later)} changed the same documents (newest first). Roll them back "
            "first, or use --cascade to roll them all back, newest first (--dry-run shows it)"
        )


class PlanRefused(ReconcilerError):
    """A saved plan that ``reconciler apply --plan ID`` will not apply: it was applied already
    (a plan is applied at most once), it expired (``guard.plan_ttl``), or the stores moved
    past it (a row or a chunk it would write changed since it was computed: ``moved`` names
    the documents). Nothing was written; exit 3."""

    def __init__(self, plan_id: str, reason: str, moved: list[str] | None = None) -> None:
        self.plan_id = plan_id
        self.reason = reason
        self.moved = list(moved or [])
        shown = ", ".join(self.moved[:10]) + (" ..." if len(self.moved) > 10 else "")
        super().__init__(
            f"plan {plan_id} was not applied: {reason}"
            + (f" ({len(self.moved)} document(s): {shown})" if self.moved else "")
            + "; nothing was written"
        )


class JobStopped(ReconcilerError):
    """A ``serve`` job was asked to stop (past its deadline, or serve is stopping): it stopped
    at a safe point (before a payload batch, or while reading a source) and is recorded as
    failed."""


class ArchiveRefused(ReconcilerError):
    """``[index] archive_collection`` names a collection that exists and cannot hold the main
    collection's points (made by someone else first: another vector size, distance or
    names); the message names it and what differs. Nothing is moved into it; a run
    reconciles the main collection alone."""


class AuditUnanswerable(ReconcilerError):
    """``audit served`` / ``audit history`` cannot answer from the log: the chain fails
    verification (an entry altered, removed or unreadable), or the instant asked about comes
    before the log's first entry."""


class NotFound(ReconcilerError):
    """A scoped run names a document or family that neither the table nor a source knows, or
    a run id (or prefix) names no recorded run."""


class AmbiguousRunId(ReconcilerError):
    """A run id prefix matches more than one run (the message lists them): a usage error."""

    def __init__(self, prefix: str, candidates: list[str]) -> None:
        self.prefix = prefix
        self.candidates = candidates
        super().__init__(
            f"run id prefix {prefix!r} matches {len(candidates)} runs: "
            + ", ".join(candidates)
            + "; give more characters"
        )


class Undeclarable(ReconcilerError):
    """Declarations that cannot be recorded as they are (``reconciler declare``): each names
    a document the table does not hold, repeats itself, would close a cycle, or says what a
    system of record contradicts. ``problems`` lists every one; nothing was recorded."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        lines = [f"{len(problems)} declaration(s) cannot be recorded (nothing was written):"]
        lines += [f"  {problem}" for problem in problems]
        super().__init__("\n".join(lines))


class VocabularyUnread(ReconcilerError):
    """A fresh deployment's configuration reads nothing of a field it maps: ``ingest``
    refuses (exit 2) rather than register every document as the source did not say."""

    def __init__(self, source: str, fields: list[str]) -> None:
        self.source = source
        self.fields = fields
        super().__init__(
            f"source {source!r}: the configuration reads nothing of "
            f"{', '.join(f'fields.{f}' for f in fields)} from any document, so every "
            "document would be registered without it (unknown is served); nothing was "
            "ingested. See what each reader extracts with `reconciler vocabulary check`, "
            "mend [sources.options], or ingest anyway with --accept-unread"
        )
