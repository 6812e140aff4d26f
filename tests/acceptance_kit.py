"""Shared plumbing of the acceptance tests: a deployment in a temp folder (config, vault,
SQLite or PostgreSQL table, Qdrant local mode or a Qdrant Edge shard), driven through the CLI, and exact snapshots of
every store to compare before and after a run."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import cache
from pathlib import Path
from typing import Any

import qdrant_edge as qe
from click.testing import CliRunner, Result
from git_kit import Repo
from sqlalchemy import create_engine, select, text
from sqlalchemy.orm import Session

from reconciler import default_filter
from reconciler.app.wiring import Stores, stores
from reconciler.cli import cli
from reconciler.filters import default_edge_filter
from reconciler.model import MANAGED_KEYS
from reconciler.settings import Settings, load_settings
from reconciler.stores.edge.index import EdgeChunkIndex
from reconciler.stores.qdrant.index import QdrantChunkIndex
from reconciler.stores.sql import SqlDocumentTable
from reconciler.stores.sql.schema import Base, DocumentRow

TODAY: date = datetime.now(UTC).date()
#: docs/contracts.md: the keys of a run's JSON object, and those of a finding and of ``writes``.
REPORT_KEYS = {"run_id", "mode", "started_at", "finished_at", "findings", "writes", "summary"}
#: Documented extras beside §7's keys.
REPORT_EXTRAS = {
    "plan",
    "refused",
    "forced",
    "guard",
    "error",
    "status",
    "unread_sources",
    "unread_reasons",
}
FINDING_KEYS = {"check", "kind", "severity", "family", "doc_id", "expected", "actual", "action"}
WRITE_KEYS = {"payload", "table", "reingest", "points"}


def day(offset: int) -> str:
    """An ISO date ``offset`` days from today."""
    return str(TODAY + timedelta(days=offset))


def instant(offset_days: float) -> str:
    """An ISO-8601 instant ``offset_days`` from now (for ``--now``)."""
    return (datetime.now(UTC) + timedelta(days=offset_days)).isoformat()


def body(title: str, *sections: str) -> str:
    """A markdown body: one chunk per section."""
    return "\n\n".join([f"# {title}", *(f"## Part {i}\n\n{s}" for i, s in enumerate(sections))])


@dataclass
class Points:
    """Every point of the collection, physically: id -> (vector, whole payload)."""

    vectors: dict[str, tuple[float, ...]]
    payloads: dict[str, dict[str, Any]]

    def unmanaged(self) -> dict[str, dict[str, Any]]:
        """Payloads without the keys the reconciler manages (text, identity, ingest keys)."""
        return {
            pid: {k: v for k, v in payload.items() if k not in MANAGED_KEYS}
            for pid, payload in self.payloads.items()
        }

    def of(self, doc_id: str) -> dict[str, dict[str, Any]]:
        """Payloads of one document's chunks."""
        return {pid: p for pid, p in self.payloads.items() if p.get("doc_id") == doc_id}


class Deployment:
    """A config file, a vault and the two stores, all under one temp folder.

    ``engine`` is the chunk index: ``"qdrant"`` (qdrant-client local mode in ``qdrant/``) or
    ``"edge"`` (a Qdrant Edge shard in ``shards/corpus``).
    """

    def __init__(
        self,
        root: Path,
        table_url: str = "sqlite:///reconciler.db",
        *,
        engine: str = "qdrant",
        configured: bool = False,
    ) -> None:
        """``configured``: the folder holds a deployment whose config is kept as it is (a
        copy of another test's), else the config is written."""
        self.root = root
        self.vault = root / "vault"
        self.vault.mkdir(parents=True, exist_ok=True)
        self.config = root / "reconciler.toml"
        self.table_url = table_url
        self.engine = engine
        if not configured:
            self.configure()

    # -- the source ----------------------------------------------------------------------------

    def configure(
        self,
        *,
        fraction: float = 1.0,
        policy: Mapping[str, str] | None = None,
        source_extra: str = "",
    ) -> None:
        """(Re)write the config; the guard's fraction is 1.0 unless a test says otherwise."""
        lines = [
            "[table]",
            f'url = "{self.table_url}"',
            "[index]",
            f'engine = "{self.engine}"',
            'path = "qdrant"' if self.engine == "qdrant" else 'path = "shards"',
            'collection = "corpus"',
            "[[sources]]",
            'name = "hb"',
            'type = "vault"',
            'path = "vault"',
            source_extra,
            "[guard]",
            f"max_changed_fraction = {fraction}",
        ]
        if policy:
            lines.append("[policy]")
            lines += [f'{k} = "{v}"' for k, v in policy.items()]
        self.config.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def note(self, name: str, text: str = "", **front: str | None) -> Path:
        """Write ``vault/<name>.md`` with frontmatter (a None value leaves the key out)."""
        path = self.vault / f"{name}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        fields = [f"{k}: {v}" for k, v in front.items() if v is not None]
        head = "---\n" + "\n".join(fields) + "\n---\n" if fields else ""
        path.write_text(head + (text or body(name, f"About {name}.")) + "\n", encoding="utf-8")
        return path

    def edit_front(self, name: str, **front: str | None) -> None:
        """Change frontmatter keys of a note, keeping its body (so its content hash)."""
        path = self.vault / f"{name}.md"
        raw = path.read_text(encoding="utf-8")
        _, head, rest = raw.split("---\n", 2)
        fields = dict(line.split(": ", 1) for line in head.strip().splitlines())
        for key, value in front.items():
            if value is None:
                fields.pop(key, None)
            else:
                fields[key] = value
        path.write_text(
            "---\n" + "\n".join(f"{k}: {v}" for k, v in fields.items()) + "\n---\n" + rest,
            encoding="utf-8",
        )

    def family(self, name: str, versions: int = 2, *, sections: int = 2) -> list[str]:
        """A family ``name`` of ``versions`` correctly marked notes; returns their doc ids."""
        ids = []
        for v in range(1, versions + 1):
            last = v == versions
            self.note(
                f"{name}-v{v}",
                body(
                    f"{name} v{v}", *(f"{name} rule {s} of version {v}." for s in range(sections))
                ),
                id=f"{name}-v{v}",
                family=name,
                version=str(v),
                status="current" if last else "superseded",
                superseded_by=None if last else f"{name}-v{v + 1}",
                effective_from=day(-400 + 100 * v),
            )
            ids.append(f"hb:{name}-v{v}")
        return ids

    # -- the CLI -------------------------------------------------------------------------------

    def cli(self, *args: str) -> Result:
        """Run ``reconciler --config <config> ARGS``."""
        return CliRunner().invoke(cli, ["--config", str(self.config), *args])

    def json(self, *args: str) -> tuple[int, Any]:
        """Run a command with ``--format json``; return (exit code, parsed output)."""
        result = self.cli("--format", "json", *args)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception
        try:
            data = json.loads(result.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(f"not JSON (exit {result.exit_code}): {result.output!r}") from exc
        return result.exit_code, data

    def init_ingest(self) -> dict[str, Any]:
        """``init`` then ``ingest``; return the ingest report. On the default SQLite file the
        table starts as a copy of ``migrated_sqlite`` (the migrations run once a session),
        which ``init`` finds up to date."""
        db = self.root / "reconciler.db"
        if self.table_url == "sqlite:///reconciler.db" and not db.exists():
            shutil.copy(migrated_sqlite(), db)
        result = self.cli("init")
        assert result.exit_code == 0, result.output
        code, data = self.json("ingest")
        assert code == 0, data
        return data

    # -- the stores ----------------------------------------------------------------------------

    @property
    def settings(self) -> Settings:
        return load_settings(self.config)

    @contextmanager
    def stores(self) -> Iterator[Stores]:
        """Both stores, opened and closed again (local mode locks its folder)."""
        with stores(self.settings) as opened:
            yield opened

    def state(self) -> dict[str, Any]:
        """What a crash test compares: every row (but ``updated_at``), payload and vector."""
        points = self.points()
        rows = {
            k: {c: v for c, v in r.items() if c != "updated_at"} for k, r in self.rows().items()
        }
        return {"rows": rows, "payloads": points.payloads, "vectors": points.vectors}

    def write_batch(self, points: int) -> None:
        """Write payloads ``points`` points a batch (``index.write_batch``)."""
        config = self.config.read_text(encoding="utf-8")
        self.config.write_text(
            config.replace(
                'collection = "corpus"', f'collection = "corpus"\nwrite_batch = {points}'
            ),
            encoding="utf-8",
        )

    def rows(self) -> dict[str, dict[str, Any]]:
        """Every document row, every column."""
        return self.dump()["documents"]  # type: ignore[no-any-return]

    def dump(self) -> dict[str, Any]:
        """Every table of the schema, every row and column, keyed by primary key."""
        engine = create_engine(self.settings.table.resolved_url())
        out: dict[str, Any] = {}
        try:
            with Session(engine) as session:
                for table in Base.metadata.sorted_tables:
                    pk = [c.name for c in table.primary_key.columns]
                    found = {}
                    for row in session.execute(select(table)).mappings():
                        key = row[pk[0]] if len(pk) == 1 else tuple(row[c] for c in pk)
                        found[key] = dict(row)
                    out[table.name] = found
        finally:
            engine.dispose()
        return out

    def sql(self, statement: str, **params: Any) -> None:
        """Execute one SQL statement on the document table's database."""
        engine = create_engine(self.settings.table.resolved_url())
        try:
            with engine.begin() as conn:
                conn.execute(text(statement), params)
        finally:
            engine.dispose()

    def points(self, scroll_filter: Any | None = None) -> Points:
        """Every point (or those under a filter of the deployment's engine): vectors and whole
        payloads."""
        with self.stores() as opened:
            index = opened.index
            found: list[Any]
            if isinstance(index, EdgeChunkIndex):
                request = qe.ScrollRequest(
                    limit=100_000, filter=scroll_filter, with_payload=True, with_vector=True
                )
                found, _ = index.shard.scroll(request)
            else:
                assert isinstance(index, QdrantChunkIndex)
                found, _ = index.client.scroll(
                    index.collection,
                    scroll_filter=scroll_filter,
                    limit=100_000,
                    with_payload=True,
                    with_vectors=True,
                )
        vectors: dict[str, tuple[float, ...]] = {}
        payloads: dict[str, dict[str, Any]] = {}
        for point in found:
            assert isinstance(point.vector, list)
            vectors[str(point.id)] = tuple(float(x) for x in point.vector)
            payloads[str(point.id)] = dict(point.payload or {})
        return Points(vectors, payloads)

    def served(self, as_of: datetime | None = None) -> set[str]:
        """doc ids of the chunks ``default_filter()`` (or its Edge form) returns."""
        edge = self.engine == "edge"
        found = self.points(default_edge_filter(as_of) if edge else default_filter(as_of))
        return {p["doc_id"] for p in found.payloads.values()}

    def set_payload(self, point_ids: list[str], payload: Mapping[str, Any]) -> None:
        """Write payload keys directly with the engine's client (drift made by another tool)."""
        with self.stores() as opened:
            index = opened.index
            if isinstance(index, EdgeChunkIndex):
                index.shard.update(qe.UpdateOperation.set_payload(list(point_ids), dict(payload)))
                return
            assert isinstance(index, QdrantChunkIndex)
            index.client.set_payload(
                index.collection, payload=dict(payload), points=list(point_ids), wait=True
            )

    def set_row(self, doc_id: str, **values: Any) -> None:
        """Update a document row directly (drift made by another tool)."""
        engine = create_engine(self.settings.table.resolved_url())
        try:
            with engine.begin() as conn:
                conn.execute(
                    DocumentRow.__table__.update()
                    .where(DocumentRow.__table__.c.doc_id == doc_id)
                    .values(**values)
                )
        finally:
            engine.dispose()


@cache
def migrated_sqlite() -> Path:
    """A migrated, empty SQLite document table (migrations run once per test session); copy
    it for each hypothesis example instead of migrating again."""
    folder = Path(tempfile.mkdtemp(prefix="reconciler-template-"))
    table = SqlDocumentTable.from_url(f"sqlite:///{folder / 'table.db'}")
    table.ensure_schema(create=True)
    table.close()
    return folder / "table.db"


def migrated_table(path: Path) -> SqlDocumentTable:
    """A document table at ``path``, a copy of ``migrated_sqlite`` (about 1 s of migrations
    saved), checked at the head revision as every command checks it on start."""
    shutil.copy(migrated_sqlite(), path)
    table = SqlDocumentTable.from_url(f"sqlite:///{path}")
    table.ensure_schema(create=True)
    return table


@contextmanager
def memory_engine(rows: list[Any], points: list[dict[str, Any]]) -> Iterator[Any]:
    """An engine (``Reconciler``, no source) over a SQLite table holding ``rows`` and an
    in-memory index holding a chunk of each payload of ``points`` (integer point ids, in
    order: as Qdrant allows), both removed at the end."""
    from reconciler.model import ChunkRecord  # noqa: PLC0415
    from reconciler.pipeline.running import Reconciler  # noqa: PLC0415
    from reconciler.testing.memory import InMemoryChunkIndex  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as folder:
        table = migrated_table(Path(folder) / "t.db")
        index = InMemoryChunkIndex()
        index.ensure_collection(dim=2)
        try:
            table.upsert_documents(rows)
            index.upsert_chunks(
                ChunkRecord(n, p.get("chunk_id", f"c{n}"), f"text {n}", (float(n), 0.5), p)
                for n, p in enumerate(points)
            )
            yield Reconciler(table=table, index=index, sources=[])
        finally:
            index.close()
            table.close()


def one_chunk_doc(name: str, state: Any = None) -> Any:
    """The row of ``kb:<name>``, a family of its own, version 1, one chunk (``state``: a
    ``VersionState``, current when none)."""
    from reconciler.model import Document, VersionState  # noqa: PLC0415

    return Document(
        doc_id=f"kb:{name}",
        source="kb",
        source_key=name,
        doc_family_id=f"kb:{name}",
        doc_version=1,
        version_state=state or VersionState.CURRENT,
        chunk_count=1,
    )


def kinds(data: Mapping[str, Any]) -> set[tuple[str, str, str | None]]:
    """(check, kind, doc_id) of every finding of a run's JSON."""
    return {(f["check"], f["kind"], f["doc_id"]) for f in data["findings"]}


def writes_zero(data: Mapping[str, Any]) -> bool:
    """Whether a run's JSON reports no write at all."""
    return all(v == 0 for v in data["writes"].values())


#: A git source's document (``git_deployment``): id and family ``{0}``, status ``{1}``, from ``{2}``.
GIT_NOTE = "---\nid: {0}\nfamily: {0}\nstatus: {1}\neffective_from: {2}\n---\n# {0}\n\nBody.\n"


def git_deployment(tmp_path: Path) -> tuple[Repo, Deployment]:
    """A repository with ``docs/alpha.md`` and ``docs/beta.md`` (current), and a deployment
    whose one source is it (``gh``, subdir ``docs``), ingested."""
    repo = Repo(tmp_path / "repo")
    for name in ("alpha", "beta"):
        repo.write(f"docs/{name}.md", GIT_NOTE.format(name, "current", day(-30)))
    repo.commit("start")
    dep = Deployment(tmp_path / "dep")
    dep.config.write_text(
        dep.config.read_text().replace(
            'name = "hb"\ntype = "vault"\npath = "vault"',
            f'name = "gh"\ntype = "git"\npath = "{repo.root}"\n[sources.options]\nsubdir = "docs"',
        )
    )
    dep.init_ingest()
    return repo, dep


def sql_table(url: str, *statements: str) -> None:
    """Run ``statements`` on the database at ``url`` (a test's document-control table)."""
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            for statement in statements:
                conn.execute(text(statement))
    finally:
        engine.dispose()


def current_notes(deploy: Deployment, count: int) -> None:
    """``count`` current notes, one family each, ingested and checked clean under a guard of
    0.2 (the guard's handover tests start from them)."""
    deploy.configure(fraction=0.2)
    for n in range(count):
        deploy.note(f"n{n:02d}", body(f"note {n}", f"rule {n}"), id=f"n{n:02d}",
                    status="current", effective_from=day(-300 + n))  # fmt: skip
    deploy.init_ingest()
    assert deploy.json("check")[0] == 0
