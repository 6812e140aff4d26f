"""``[index]``: the chunk index (Qdrant, embedded or a server, or a Qdrant Edge shard)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from reconciler.errors import ConfigError
from reconciler.model import ALL_KEYS, defaults
from reconciler.payload import KeyMap
from reconciler.settings.shared import SecretVariable, Section


class IndexSettings(Section):
    """The chunk index. ``engine = "qdrant"`` (qdrant-client): embedded local mode (``path``)
    or a server (``url``). ``engine = "edge"``: a Qdrant Edge shard (beta, embedded, one
    process at a time) at ``path``/``collection``; needs the ``edge`` extra."""

    engine: Literal["qdrant", "edge"] = "qdrant"
    path: str | None = None
    url: str | None = None
    api_key_env: SecretVariable = None
    api_key_file: str | None = None
    collection: str = "corpus"
    #: A split store: the collection (an Edge shard beside ``collection``'s) that holds every
    #: chunk of a version that is not servable (superseded, retired, draft), so the main one
    #: holds only what may be served. Unset: one collection.
    archive_collection: str | None = None
    #: The framework whose payload layout the collection has (``reconciler.payload.LAYOUTS``):
    #: sets the defaults of payload_prefix, text_key and keys.doc_id (explicit ones win), and
    #: what the reference ingestion writes beside them. ``[bootstrap] preset`` is its old name.
    layout: Literal["default", "langchain", "llamaindex"] = "default"
    payload_prefix: str = ""
    #: Where chunk text lives (``page_content`` in LangChain-built collections).
    text_key: str = "text"
    keys: dict[str, str] = Field(default_factory=dict)
    timeout: float = Field(default=30.0, gt=0)
    scroll_batch: int = Field(default=defaults.SCROLL_BATCH, gt=0)
    write_batch: int = Field(default=defaults.WRITE_BATCH, gt=0)

    @field_validator("path", "url", "api_key_file", "archive_collection", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        """An empty value (``RECONCILER_INDEX__PATH=""`` to switch to a server) is unset."""
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("keys")
    @classmethod
    def _known_keys(cls, value: dict[str, str]) -> dict[str, str]:
        unknown = sorted(set(value) - set(ALL_KEYS))
        if unknown:
            raise ValueError(
                f"unknown payload key(s) {', '.join(unknown)}; renamable keys are "
                + ", ".join(ALL_KEYS)
            )
        for stored in value.values():
            if not stored or "." in stored:
                raise ValueError("renamed key names must be non-empty and contain no '.'")
        return value

    @field_validator("payload_prefix")
    @classmethod
    def _prefix(cls, value: str) -> str:
        if value and (value.startswith(".") or ".." in value):
            raise ValueError('a dotted path such as "metadata." or ""')
        return value if not value or value.endswith(".") else value + "."

    @model_validator(mode="after")
    def _one_location(self) -> IndexSettings:
        if self.archive_collection is not None and self.archive_collection == self.collection:
            raise ValueError(
                f"index.archive_collection names the main collection {self.collection!r}: "
                'name another one (e.g. "corpus_archive"), or remove it for one collection'
            )
        if self.engine == "edge":
            if self.url:
                raise ValueError(
                    'index.url names a Qdrant server, which engine = "edge" does not use: '
                    "remove index.url (Edge keeps its shard under index.path), or set "
                    'engine = "qdrant"'
                )
            if not self.path:
                raise ValueError('engine = "edge" needs index.path, the folder of its shards')
            if self.api_key_env or self.api_key_file:
                raise ValueError(
                    'engine = "edge" takes no API key: remove index.api_key_env/api_key_file'
                )
            return self
        if bool(self.path) == bool(self.url):
            raise ValueError("set exactly one of index.path (embedded) or index.url (server)")
        if self.api_key_env and self.api_key_file:
            raise ValueError("set at most one of index.api_key_env or index.api_key_file")
        return self

    @property
    def key_map(self) -> KeyMap:
        """The payload key layout this collection uses."""
        return KeyMap(prefix=self.payload_prefix, renames=self.keys)

    def api_key(self) -> str | None:
        """The Qdrant API key, from the environment or a file; never logged."""
        if self.api_key_env:
            value = os.environ.get(self.api_key_env)
            if not value:
                raise ConfigError(
                    [("index.api_key_env", f"environment variable {self.api_key_env} is not set")]
                )
            return value
        if self.api_key_file:
            try:
                return Path(self.api_key_file).read_text(encoding="utf-8").strip()
            except OSError as exc:
                raise ConfigError(
                    [("index.api_key_file", f"cannot read {self.api_key_file}: {exc.strerror}")]
                ) from None
        return None
