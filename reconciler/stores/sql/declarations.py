"""The declarations repository: a person's decisions of family and supersession, recorded and
revoked with their audit entries in one transaction (``reconciler declare``, and the rollback
of the run that recorded them)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sqlalchemy import Engine, insert, select, update
from sqlalchemy.orm import Session, sessionmaker

from reconciler.model import AuditEntry, AuditKind, Declaration, DeclarationKind
from reconciler.stores.sql import audit
from reconciler.stores.sql.bulk import insert_through_driver
from reconciler.stores.sql.schema import Base, DeclarationRow

#: The audit entries' target type.
TARGET_TYPE = AuditKind.DECLARATION
#: The table, for Core's inserts.
_TABLE = Base.metadata.tables[DeclarationRow.__tablename__]
#: Ids looked up at once.
_CHUNK = 500


def declaration_from_row(row: DeclarationRow) -> Declaration:
    """A stored declaration as the model's value."""
    return Declaration(
        id=row.id,
        kind=DeclarationKind(row.kind),
        doc_id=row.doc_id,
        target=row.target,
        declared_by=row.declared_by,
        declared_at=row.declared_at,
        reason=row.reason,
        evidence=row.evidence,
        score=row.score,
        proposal=row.proposal,
        run_id=row.run_id,
        revoked_at=row.revoked_at,
        revoked_by=row.revoked_by,
    )


def _values(decl: Declaration) -> dict[str, Any]:
    """A declaration as the row's values."""
    return {
        "id": decl.id,
        "kind": str(decl.kind),
        "doc_id": decl.doc_id,
        "target": decl.target,
        "declared_by": decl.declared_by,
        "declared_at": decl.declared_at,
        "reason": decl.reason,
        "evidence": decl.evidence,
        "score": decl.score,
        "proposal": decl.proposal,
        "run_id": decl.run_id,
        "revoked_at": decl.revoked_at,
        "revoked_by": decl.revoked_by,
    }


class SqlDeclarations:
    """The ``declarations`` table."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def declarations(
        self, *, active: bool = True, ids: Iterable[str] | None = None
    ) -> list[Declaration]:
        """Declarations in the order they were made (``active``: only those not revoked)."""
        wanted = sorted(set(ids)) if ids is not None else None
        found: list[Declaration] = []
        with Session(self.engine) as session:
            for start in range(0, len(wanted), _CHUNK) if wanted is not None else (0,):
                stmt = select(DeclarationRow)
                if active:
                    stmt = stmt.where(DeclarationRow.revoked_at.is_(None))
                if wanted is not None:
                    stmt = stmt.where(DeclarationRow.id.in_(wanted[start : start + _CHUNK]))
                found += (declaration_from_row(r) for r in session.scalars(stmt))
        return sorted(found, key=lambda d: (d.declared_at, d.id))

    def write_declarations(
        self,
        *,
        run_id: str,
        actor: str,
        at: datetime,
        added: Sequence[Declaration] = (),
        revoked: Sequence[str] = (),
        restored: Sequence[str] = (),
        reason: str | None = None,
    ) -> str:
        """Record, revoke and restore declarations with their audit entries, in ONE
        transaction; return the new audit head ("" when nothing was written)."""
        entries: list[AuditEntry] = []

        def entry(target: str, before: object, after: object, why: str | None) -> None:
            entries.append(
                AuditEntry(
                    run_id=run_id,
                    at=at,
                    actor=actor,
                    reason=why,
                    target_type=TARGET_TYPE,
                    target=target,
                    before=before,
                    after=after,
                )
            )

        with self._sessions.begin() as session:
            new = [_values(decl) for decl in added]
            if new and not insert_through_driver(session, _TABLE, new):
                # one executemany through Core (no ORM object a declaration)
                session.execute(insert(_TABLE), new)
            for decl in added:
                entry(decl.id, None, decl.to_json(), reason or decl.reason)
            for ids, revoking in ((revoked, True), (restored, False)):
                for start in range(0, len(ids), _CHUNK):
                    rows = session.scalars(
                        select(DeclarationRow)
                        .where(DeclarationRow.id.in_(ids[start : start + _CHUNK]))
                        .with_for_update()
                    ).all()
                    for row in sorted(rows, key=lambda r: r.id):
                        if (row.revoked_at is None) is not revoking:
                            continue  # already as asked
                        before = declaration_from_row(row)
                        after = replace(
                            before,
                            revoked_at=at if revoking else None,
                            revoked_by=run_id if revoking else None,
                        )
                        session.execute(
                            update(DeclarationRow)
                            .where(DeclarationRow.id == row.id)
                            .values(revoked_at=after.revoked_at, revoked_by=after.revoked_by)
                        )
                        entry(row.id, before.to_json(), after.to_json(), reason)
            if not entries:
                return ""
            return audit.append(session, entries)
