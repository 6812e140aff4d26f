"""``reconciler audit seal``: one entry appended to the audit chain, on its own, so that the
chain ends in an entry hashed under the audit key when one is given. How a deployment whose
log predates the key starts the keyed part (docs/auditing.md, "Who the log protects
against"); with no key, it is an ordinary entry."""

from __future__ import annotations

import uuid
from datetime import datetime

from reconciler.model import AuditEntry
from reconciler.ports.table import AuditWriter

#: The entry's type and target (read by nothing that answers what was served).
SEAL_TYPE = "audit"
SEAL_TARGET = "chain"


def seal(table: AuditWriter, *, at: datetime, actor: str = "cli") -> str:
    """Append the seal; return the chain's new head."""
    entry = AuditEntry(
        run_id=f"seal-{uuid.uuid4().hex[:8]}",
        at=at,
        actor=actor,
        reason="sealed: the chain as it stands, under the audit key if one is given",
        target_type=SEAL_TYPE,
        target=SEAL_TARGET,
        before=None,
        after={"sealed_at": at.isoformat()},
    )
    return table.append_audit([entry])
