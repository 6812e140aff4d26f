"""A LangChain retriever that serves only versions in force at the instant of each query.

A retriever made by a vector store around a filter object keeps the instant that filter was
built at: after a successor's ``effective_from`` passes it goes on citing the replaced
version, and after the next run it finds no version of that family at all. This retriever
builds the filter inside every call (``retrieving.search``), from its ``clock``::

    from reconciler.integrations.langchain import VersionAwareRetriever

    retriever = VersionAwareRetriever.from_vector_store(vector_store, settings=settings)
    docs = retriever.invoke("what may I expense?")

Needs the extra: ``pip install 'corpus-reconciler[langchain]'``.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any

try:
    from langchain_core.callbacks import (
        AsyncCallbackManagerForRetrieverRun,
        CallbackManagerForRetrieverRun,
    )
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
except ImportError as exc:  # pragma: no cover - exercised in a subprocess without the extra
    raise ImportError(
        "reconciler.integrations.langchain needs LangChain: "
        "pip install 'corpus-reconciler[langchain]'"
    ) from exc
from pydantic import BeforeValidator, SkipValidation, TypeAdapter, model_validator

from reconciler.clock import SYSTEM_CLOCK, Clock
from reconciler.embedding import Embedder
from reconciler.integrations.retrieving import Hit, Route, instant_of, lower_is_better, search
from reconciler.payload import KeyMap

if TYPE_CHECKING:
    from langchain_qdrant import QdrantVectorStore
    from qdrant_client import QdrantClient

    from reconciler.settings import Settings

__all__ = ["EmbedderEmbeddings", "VersionAwareRetriever"]


@functools.cache
def _adapter(name: str) -> TypeAdapter[Any]:
    """The validator of a per-call option: the retriever's field of that name (its type and
    its validators)."""
    field = VersionAwareRetriever.model_fields[name]
    annotation: Any = field.annotation
    if field.metadata:
        annotation = Annotated[(annotation, *field.metadata)]
    return TypeAdapter(annotation)


class EmbedderEmbeddings(Embeddings):
    """One of this project's embedders (``reconciler.embedding``) as LangChain embeddings:
    query a collection the reference ingestion wrote with the vectors it wrote."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [list(vector) for vector in self.embedder.embed(texts)]

    def embed_query(self, text: str) -> list[float]:
        return list(self.embedder.embed([text])[0])


class VersionAwareRetriever(BaseRetriever):
    """Retrieves the ``k`` best chunks in force at the instant of each query.

    Per call (``invoke(query, k=..., as_of=..., include_historical=...,
    score_threshold=...)``) or per retriever (the fields of the same names): ``as_of`` asks
    what was (or will be) in force at that instant; ``include_historical=True`` adds
    superseded and retired versions (logged), over the archive too in a split store.
    Quarantined chunks never come back. Each ``Document``'s metadata is what the store keeps
    under ``metadata_key`` plus the version keys (``doc_id``, ``version_state``,
    ``effective_from``, ``effective_to``...) under their logical names, ``_id`` and ``_score``.
    """

    #: A ``qdrant_client.QdrantClient`` (typed Any: pydantic resolves field types at runtime,
    #: and qdrant-client is imported only where a filter is built).
    client: SkipValidation[Any]
    route: SkipValidation[Route]
    embeddings: Embeddings
    k: int = 4
    score_threshold: float | None = None
    #: Read as ``retrieving.instant_of`` reads it (pydantic alone took an ISO 8601 basic text,
    #: ``"20250301"``, for a count of seconds since 1970).
    as_of: Annotated[datetime | None, BeforeValidator(instant_of)] = None
    include_historical: bool = False
    #: Where LangChain's store keeps a document's metadata in a payload.
    metadata_key: str = "metadata"
    #: Reads "now" at each query; the real clock unless a test hands in another.
    clock: SkipValidation[Clock] = SYSTEM_CLOCK

    @model_validator(mode="before")
    @classmethod
    def _known_fields(cls, data: Any) -> Any:
        """A field this retriever does not have is refused, not dropped (LangChain's models
        ignore extra fields: a ``filter`` or ``search_kwargs`` given when it is built, meant
        to narrow what it returns, was dropped silently and every tenant's chunks served)."""
        if isinstance(data, Mapping):
            unknown = sorted(set(data) - set(cls.model_fields))
            if unknown:
                raise TypeError(
                    f"unknown field(s) {', '.join(unknown)}: this retriever takes k, "
                    "score_threshold, as_of, include_historical (it builds its own filter)"
                )
        return data

    @classmethod
    def from_vector_store(
        cls,
        store: QdrantVectorStore,
        *,
        settings: Settings | None = None,
        archive: str | None = None,
        keys: KeyMap | None = None,
        **fields: Any,
    ) -> VersionAwareRetriever:
        """Search the collection of a ``langchain_qdrant.QdrantVectorStore`` with its client,
        embeddings, vector and content key. The payload layout and the archive come from the
        deployment's ``settings`` (``[index]``) when given, else from ``keys`` and
        ``archive``, else the version keys are read under the store's metadata key."""
        if store.embeddings is None:
            raise ValueError(
                "the vector store has no dense embeddings (sparse mode): build it with "
                "embedding=... so that queries can be embedded"
            )
        layout = keys or (
            settings.index.key_map
            if settings is not None
            else KeyMap(prefix=f"{store.metadata_payload_key}.")
        )
        if archive is None and settings is not None:
            archive = settings.index.archive_collection
        route = Route(
            collection=store.collection_name,
            archive=archive,
            keys=layout,
            text_key=store.content_payload_key,
            vector_name=store.vector_name,
            lower_is_better=lower_is_better(str(store.distance)),
        )
        return cls(
            client=store.client,
            route=route,
            embeddings=store.embeddings,
            metadata_key=store.metadata_payload_key,
            **fields,
        )

    @classmethod
    def from_client(
        cls,
        client: QdrantClient,
        collection: str | None = None,
        *,
        embeddings: Embeddings,
        settings: Settings | None = None,
        archive: str | None = None,
        keys: KeyMap | None = None,
        text_key: str | None = None,
        vector_name: str | None = None,
        **fields: Any,
    ) -> VersionAwareRetriever:
        """Search ``collection`` (default: the deployment's ``[index] collection``) through
        ``client``, laid out as ``settings`` say (or as ``keys``, ``text_key`` and
        ``archive`` say; the defaults are the reconciler's own layout). ``vector_name``: the
        dense vector to search where the collection has several named ones."""
        route = Route.of(
            collection,
            settings=settings,
            archive=archive,
            keys=keys,
            text_key=text_key,
            vector_name=vector_name,
        )
        return cls(client=client, route=route, embeddings=embeddings, **fields)

    def _options(self, kwargs: Mapping[str, Any]) -> dict[str, Any]:
        unknown = sorted(set(kwargs) - {"k", "score_threshold", "as_of", "include_historical"})
        if unknown:
            raise TypeError(
                f"unknown retrieval option(s) {', '.join(unknown)}: this retriever takes k, "
                "score_threshold, as_of and include_historical (it builds its own filter)"
            )
        # Read as the fields of the same names read them (an ``as_of`` text, a date; a
        # ``include_historical="false"``, truthy taken as it is, as False).
        return {
            name: (
                _adapter(name).validate_python(kwargs[name])
                if name in kwargs
                else getattr(self, name)
            )
            for name in ("k", "score_threshold", "as_of", "include_historical")
        }

    def _search(self, vector: list[float], options: dict[str, Any]) -> list[Document]:
        hits = search(self.client, self.route, vector, clock=self.clock, **options)
        return [self._document(hit) for hit in hits]

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        options = self._options(kwargs)
        return self._search(self.embeddings.embed_query(query), options)

    async def _aget_relevant_documents(
        self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        options = self._options(kwargs)
        vector = await self.embeddings.aembed_query(query)
        return await asyncio.to_thread(self._search, vector, options)

    def _document(self, hit: Hit) -> Document:
        stored = hit.payload.get(self.metadata_key)
        metadata: dict[str, Any] = dict(stored) if isinstance(stored, Mapping) else {}
        for key, value in hit.version.items():
            metadata.setdefault(key, value)
        metadata["_id"] = hit.point_id
        metadata["_score"] = hit.score
        return Document(page_content=hit.text or "", metadata=metadata, id=hit.point_id)
