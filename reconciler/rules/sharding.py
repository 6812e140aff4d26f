"""Sharding: which runner reconciles which families (``--shard i/N``).

A family belongs to exactly one shard, by a stable hash of its id, so N runners (each holding
its shard's lease) partition a deployment without coordinating.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


def stable_shard(family: str, shards: int) -> int:
    """The partition of a family: a stable hash of its id modulo ``shards``."""
    value = int.from_bytes(hashlib.sha256(family.encode("utf-8")).digest()[:8], "big")
    return value % shards


@dataclass(frozen=True, slots=True)
class Shard:
    """Partition ``index`` of ``count`` (``--shard i/N``); the default covers everything."""

    index: int = 0
    count: int = 1

    def __post_init__(self) -> None:
        if not 0 <= self.index < self.count:
            raise ValueError(f"shard {self.index}/{self.count}: need 0 <= i < N")

    @property
    def whole(self) -> bool:
        """Whether this shard is the whole corpus (no ``--shard``): it owns every family."""
        return self.count == 1

    def owns(self, family: str | None) -> bool:
        """Whether this shard reconciles ``family``."""
        return self.whole or stable_shard(family or "", self.count) == self.index

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> Shard:
        """Parse ``"i/N"``."""
        index, sep, count = text.partition("/")
        if not sep or not index.isdigit() or not count.isdigit() or int(count) == 0:
            raise ValueError(f"--shard takes i/N with 0 <= i < N, got {text!r}")
        return cls(int(index), int(count))
