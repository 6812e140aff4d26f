"""What protects the audit chain from someone who can write the table: a key the table's
writers do not hold, and an anchor of the chain's head kept outside the table.

Without either, the chain is *unkeyed*: anyone who can write the table can change an entry,
recompute every later hash, the head and the runs' heads, and ``audit verify`` says intact.

- **Keyed** (``RECONCILER_AUDIT_KEY``, or ``RECONCILER_AUDIT_KEY_FILE`` naming a file that
  holds it): each new entry's hash is an HMAC-SHA256 under the key instead of a plain SHA-256
  (same length, same column). Without the key nobody can make a keyed entry, so a change to
  any entry before the last keyed one cannot be hidden by recomputing the chain: the keyed
  entries after it would have to be recomputed too. Entries written before the key was set
  stay unkeyed and still verify; once an entry is keyed every later one must be.
- **Anchored** (``RECONCILER_AUDIT_ANCHOR`` naming a file): after every committed append the
  head (how many entries, the last one's hash, and its HMAC when keyed) is written there,
  atomically. Kept where the table's writers cannot write (another volume, another owner),
  it catches a chain rewritten up to the anchored entry, and a table restored from an older
  copy (the anchored entry is gone), which a key alone cannot.

With a key given, the chain must end in a keyed entry: an insider who rewrites the keyed part
whole, unkeyed, is found as surely as one who rewrites part of it. So an existing deployment
that sets a key runs ``reconciler audit seal`` once (it appends one keyed entry, ``audit``
``chain``); until then, or any other write, ``audit verify`` says to.

Both are read from the environment when used, never from the table, never logged.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import event
from sqlalchemy.orm import Session

from reconciler.errors import ReconcilerError
from reconciler.model import Verification
from reconciler.stores.replacing import replace_text

__all__ = [
    "ANCHOR_ENV",
    "KEY_ENV",
    "KEY_FILE_ENV",
    "Anchor",
    "AuditProtectionError",
    "ProtectedVerification",
    "anchor_after_commit",
    "anchor_of",
    "audit_key",
    "keyed_digest",
    "read_anchor",
    "say_protection",
    "write_anchor",
]

log = logging.getLogger(__name__)

KEY_ENV = "RECONCILER_AUDIT_KEY"
KEY_FILE_ENV = "RECONCILER_AUDIT_KEY_FILE"
ANCHOR_ENV = "RECONCILER_AUDIT_ANCHOR"


class AuditProtectionError(ReconcilerError):
    """The audit key or anchor is configured but cannot be used (a file that cannot be read,
    an anchor that is not one)."""


def audit_key() -> bytes | None:
    """The audit key from the environment (the variable, else the file it names), or None."""
    value = os.environ.get(KEY_ENV)
    if value:
        return value.encode()
    path = os.environ.get(KEY_FILE_ENV)
    if not path:
        return None
    try:
        key = Path(path).read_bytes().strip()
    except OSError as exc:
        raise AuditProtectionError(
            f"{KEY_FILE_ENV} names {path}, which cannot be read ({exc.strerror or exc})"
        ) from None
    if not key:
        raise AuditProtectionError(f"{KEY_FILE_ENV} names {path}, which is empty")
    return key


def keyed_digest(key: bytes, message: str) -> str:
    """HMAC-SHA256 of ``message`` under ``key``, as 64 hex digits."""
    return hmac.new(key, message.encode(), hashlib.sha256).hexdigest()


def anchor_path() -> Path | None:
    """Where the head is anchored, or None."""
    value = os.environ.get(ANCHOR_ENV)
    return Path(value) if value else None


@dataclass
class ProtectedVerification(Verification):
    """A walk's result, with what protected the chain in words (keyed, anchored, unkeyed)."""

    protection: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Anchor:
    """The chain's head as last anchored: its number of entries and last hash, when, and the
    HMAC of both under the key (None when unkeyed)."""

    entries: int
    head: str
    at: str
    mac: str | None

    def message(self) -> str:
        return f"{self.entries}:{self.head}"


def write_anchor(path: Path, *, entries: int, head: str, key: bytes | None) -> None:
    """Replace the anchor at ``path`` with this head, atomically (a temporary file, synced,
    renamed over it)."""
    anchor = Anchor(entries, head, datetime.now(UTC).isoformat(), None)
    mac = keyed_digest(key, anchor.message()) if key else None
    data = {"entries": entries, "head": head, "at": anchor.at, "mac": mac}
    try:
        replace_text(path, json.dumps(data) + "\n", prefix=".anchor-")
    except OSError as exc:
        raise AuditProtectionError(
            f"the audit head could not be anchored in {path} ({exc.strerror or exc}); the "
            "entries are written, the next write anchors them"
        ) from None


def read_anchor(path: Path) -> Anchor | None:
    """The anchor at ``path`` (None when there is none yet); ``AuditProtectionError`` for a
    file that is not an anchor."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise AuditProtectionError(
            f"the anchor {path} cannot be read ({exc.strerror or exc})"
        ) from None
    try:
        data = json.loads(text)
        return Anchor(int(data["entries"]), str(data["head"]), str(data["at"]), data.get("mac"))
    except (ValueError, KeyError, TypeError) as exc:
        raise AuditProtectionError(f"the anchor {path} is not one ({exc}): altered") from None


def anchor_after_commit(session: Session, entries: int, head: str, key: bytes | None) -> None:
    """Anchor this head outside the table (``RECONCILER_AUDIT_ANCHOR``) once the caller's
    transaction commits (a head rolled back is never anchored)."""
    path = anchor_path()
    if path is None:
        return
    session.info["audit_anchor"] = (entries, head)
    if session.info.get("audit_anchor_listening"):
        return
    session.info["audit_anchor_listening"] = True

    def anchor(committed: Session) -> None:
        pending = committed.info.pop("audit_anchor", None)
        if pending is None:
            return
        try:
            write_anchor(path, entries=pending[0], head=pending[1], key=key)
        except AuditProtectionError as exc:  # the write is committed: say so, do not fail it
            log.error("%s", exc)

    def forget(rolled_back: Session) -> None:
        rolled_back.info.pop("audit_anchor", None)

    event.listen(session, "after_commit", anchor)
    event.listen(session, "after_rollback", forget)


def anchor_of(result: ProtectedVerification, key: bytes | None) -> tuple[Anchor | None, str]:
    """The anchor to check the chain against (a problem when it cannot be trusted)."""
    path = anchor_path()
    if path is None:
        return None, ""
    where = f"the anchor {path}"
    try:
        anchor = read_anchor(path)
    except AuditProtectionError as exc:
        result.problems.append(str(exc))
        return None, where
    if anchor is None:
        result.protection.append(f"anchored: not yet ({path} is written after the next append)")
        return None, where
    if key is not None and (
        anchor.mac is None or anchor.mac != keyed_digest(key, anchor.message())
    ):
        result.problems.append(
            f"{where} does not carry the key's HMAC of its head: it was written without the key "
            "or altered"
        )
        return None, where
    return anchor, where


def say_protection(
    result: ProtectedVerification,
    key: bytes | None,
    keyed_from: int | None,
    unkeyed_after: list[int],
    anchor: Anchor | None,
    where: str,
) -> None:
    """Say what protected the chain, and what a protection in force found."""
    if keyed_from is not None:
        result.protection.append(
            f"keyed: every entry from entry {keyed_from} is an HMAC under the audit key"
            + (f" (the {keyed_from - 1} before it are unkeyed: written before the key)"
               if keyed_from > 1 else "")
        )  # fmt: skip
    elif key is not None and result.entries:
        result.problems.append(
            "a key is given, but the chain does not end in a keyed entry: if the key was just "
            "set, run `reconciler audit seal` once (it appends a keyed entry); otherwise the "
            "chain was rewritten without the key"
        )
        result.protection.append("keyed: a key is given, but no entry is keyed")
    elif key is not None:
        result.protection.append("keyed: a key is given; the log is empty")
    else:
        result.protection.append(
            "unkeyed: no audit key given; whoever can write the table can rewrite the chain "
            "and recompute its hashes unseen (set RECONCILER_AUDIT_KEY or "
            "RECONCILER_AUDIT_KEY_FILE; docs/auditing.md)"
        )
    if unkeyed_after:
        shown = ", ".join(str(seq) for seq in unkeyed_after[:10])
        more = f" and {len(unkeyed_after) - 10} more" if len(unkeyed_after) > 10 else ""
        result.problems.append(
            f"entries {shown}{more}: unkeyed after keyed entries from {keyed_from}: written "
            "or rewritten without the key"
        )
    if anchor is not None:
        if result.entries < anchor.entries:
            result.problems.append(
                f"{where} holds entry number {anchor.entries} ({anchor.head[:12]}, at "
                f"{anchor.at}), but the log holds {result.entries}: entries were removed, or "
                "the table was restored from an older copy"
            )
        result.protection.append(
            f"anchored: the head at entry {anchor.entries} ({anchor.at}) is held in "
            f"{where.removeprefix('the anchor ')}" + (", with the key's HMAC" if anchor.mac else "")
        )
    elif not where:
        result.protection.append(
            "not anchored: no RECONCILER_AUDIT_ANCHOR file holds the head outside the table"
        )
