"""The re-keying repository: documents given new ids in place, in one transaction.

A re-keying (``reconciler rekey``, ``writing.rekeying``) renames a document everywhere the
table names it: its row (id and source key), its identity in the identity map, every
``superseded_by`` that points at it, its pending re-ingest requests, the declarations about
it. Each rename is audited (``rekey_row``) in the same transaction. Findings and the audit log
keep the ids they were written with: they are history.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import Engine, delete, select, update
from sqlalchemy.orm import Session, sessionmaker

from reconciler.model import AuditEntry, AuditKind, DeclarationKind
from reconciler.ports.table import DocumentRename
from reconciler.stores.sql import audit
from reconciler.stores.sql.schema import DeclarationRow, DocumentRow, IdentityRow, OutboxRow


class SqlRekeys:
    """Documents renamed in place (``rekey_documents``)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._sessions = sessionmaker(engine, expire_on_commit=False)

    def rekey_documents(
        self, *, run_id: str, actor: str, at: datetime, renames: Sequence[DocumentRename]
    ) -> str:
        """Give documents their new ids in ONE transaction (``DocumentWriter``'s docstring)."""
        entries: list[AuditEntry] = []
        with self._sessions.begin() as session:
            for rename in renames:
                if _rename(session, rename, at):
                    entries.append(
                        AuditEntry(
                            run_id=run_id,
                            at=at,
                            actor=actor,
                            reason="rekey",
                            target_type=AuditKind.REKEY_ROW,
                            target=rename.new_id,
                            before={"doc_id": rename.old_id, "source_key": rename.old_key},
                            after={"doc_id": rename.new_id, "source_key": rename.new_key},
                        )
                    )
            return audit.append(session, entries) if entries else ""


def _rename(session: Session, r: DocumentRename, at: datetime) -> bool:
    """Rename one document; False when there is nothing to rename (done before, or its row
    is gone) or when the new id is taken (left as it is)."""
    ids = set(
        session.scalars(
            select(DocumentRow.doc_id).where(DocumentRow.doc_id.in_([r.old_id, r.new_id]))
        )
    )
    if r.old_id not in ids or r.new_id in ids:
        return False
    session.execute(
        update(DocumentRow)
        .where(DocumentRow.doc_id == r.old_id)
        .values(doc_id=r.new_id, source_key=r.new_key, updated_at=at)
    )
    session.execute(
        update(DocumentRow)
        .where(DocumentRow.superseded_by == r.old_id)
        .values(superseded_by=r.new_id, updated_at=at)
    )
    _rename_identity(session, r)
    session.execute(
        update(OutboxRow)
        .where(OutboxRow.doc_id == r.old_id, OutboxRow.status == "pending")
        .values(doc_id=r.new_id, source_key=r.new_key)
    )
    session.execute(
        update(DeclarationRow).where(DeclarationRow.doc_id == r.old_id).values(doc_id=r.new_id)
    )
    session.execute(
        update(DeclarationRow)
        .where(
            DeclarationRow.target == r.old_id,
            DeclarationRow.kind == str(DeclarationKind.SUPERSEDE),
        )
        .values(target=r.new_id)
    )
    return True


def _rename_identity(session: Session, r: DocumentRename) -> None:
    """The old key's identity becomes the new key's (a scan under the new ids may have
    recorded the new key already: it takes the old one's family and first sighting)."""
    if r.old_key == r.new_key:
        return
    old = session.get(IdentityRow, (r.source, r.old_key))
    if old is None:
        return
    new = session.get(IdentityRow, (r.source, r.new_key))
    if new is None:
        session.execute(
            update(IdentityRow)
            .where(IdentityRow.source == r.source, IdentityRow.source_key == r.old_key)
            .values(source_key=r.new_key)
        )
        return
    new.doc_family_id = old.doc_family_id
    new.first_seen = min(old.first_seen, new.first_seen)
    new.path = new.path or old.path
    session.flush()
    session.execute(
        delete(IdentityRow).where(
            IdentityRow.source == r.source, IdentityRow.source_key == r.old_key
        )
    )
