"""What only the Qdrant adapter does: streaming pages, mapping client failures, local locks."""

from __future__ import annotations

import inspect
import logging
import socket
import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from qdrant_client import QdrantClient, models
from qdrant_client.common import client_warnings

from reconciler.errors import ConfigError, IndexUnavailable, IndexWriteError
from reconciler.model import ChunkRecord, PayloadWrite
from reconciler.payload import KeyMap
from reconciler.stores.qdrant.index import QdrantChunkIndex, connect

DIM = 4
COLLECTION = "chunks"


class Proxy:
    """Forwards to a real client, recording calls; ``before`` hooks may act on the N-th call."""

    def __init__(self, client: QdrantClient) -> None:
        self._client = client
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.before: dict[str, Any] = {}
        self.override: dict[str, Any] = {}

    def count_of(self, name: str) -> int:
        return sum(1 for called, _ in self.calls if called == name)

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            if name in self.before:
                self.before[name](self.count_of(name))
            if name in self.override:
                return self.override[name](attribute, *args, **kwargs)
            return attribute(*args, **kwargs)

        return call


@pytest.fixture
def client(tmp_path: Path) -> Iterator[QdrantClient]:
    client = connect(path=str(tmp_path / "qdrant"))
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def proxy(client: QdrantClient) -> Proxy:
    return Proxy(client)


def make_index(client: Any, keys: KeyMap | None = None) -> QdrantChunkIndex:
    return QdrantChunkIndex(client, collection=COLLECTION, keys=keys or KeyMap())


def records(count: int, *, docs: int = 10) -> Iterator[ChunkRecord]:
    for n in range(count):
        doc_id = f"src:doc-{n % docs}"
        yield ChunkRecord(
            point_id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"chunk-{n}")),
            chunk_id=f"{doc_id}#{n}",
            text=f"text of chunk {n}",
            vector=(1.0, float(n % 7), 0.5, 0.25),
            payload={"doc_id": doc_id, "chunk_id": f"{doc_id}#{n}", "version_state": "current"},
        )


def filled(client: Any, count: int) -> QdrantChunkIndex:
    index = make_index(client)
    index.ensure_collection(dim=DIM)
    assert index.upsert_chunks(records(count)) == count
    return index


def test_scroll_streams_pages_of_batch_size(proxy: Proxy) -> None:
    # Small on purpose: 250 points in pages of 25 cross ten page boundaries (local Qdrant
    # pages by scanning, so a large collection only makes this slow).
    index = filled(proxy, 250)
    proxy.calls.clear()

    stream = index.scroll(batch_size=25)

    streaming = inspect.isgenerator(stream)
    assert streaming
    assert proxy.calls == []  # nothing is read before the first item is asked for
    first = next(stream)
    assert proxy.count_of("scroll") == 1
    ids = {first.point_id} | {state.point_id for state in stream}
    assert len(ids) == 250
    scrolls = [kwargs for name, kwargs in proxy.calls if name == "scroll"]
    assert len(scrolls) == 10
    for kwargs in scrolls:
        assert kwargs["limit"] == 25
        assert kwargs["with_vectors"] is False
        selector = kwargs["with_payload"]
        assert isinstance(selector, models.PayloadSelectorInclude)
        assert "text" not in selector.include
        assert "doc_id" in selector.include


def test_upsert_chunks_batches_by_256(proxy: Proxy) -> None:
    filled(proxy, 600)

    sizes = [len(kwargs["points"]) for name, kwargs in proxy.calls if name == "upsert"]
    assert sizes == [256, 256, 88]


def test_write_to_a_missing_point_reports_points_written(client: QdrantClient) -> None:
    index = filled(client, 6)
    ids = [state.point_id for state in index.scroll()]
    missing = str(uuid.uuid5(uuid.NAMESPACE_URL, "deleted-after-the-scan"))
    writes = [
        PayloadWrite(point_ids=tuple(ids[:3]), payload={"quarantined": True}),
        PayloadWrite(point_ids=(ids[3], missing, ids[4]), payload={"quarantined": True}),
    ]

    with pytest.raises(IndexWriteError) as caught:
        index.set_payloads(writes, batch_size=3)

    assert caught.value.points_written == 3
    assert missing in str(caught.value)
    assert "next run" in str(caught.value)
    assert isinstance(caught.value.__cause__, KeyError)


def test_collection_deleted_between_batches(proxy: Proxy, client: QdrantClient) -> None:
    index = filled(proxy, 12)
    ids = tuple(state.point_id for state in index.scroll())

    def drop_on_second_call(number: int) -> None:
        if number == 2:
            client.delete_collection(COLLECTION)

    proxy.before["batch_update_points"] = drop_on_second_call

    with pytest.raises(IndexWriteError) as caught:
        index.set_payloads([PayloadWrite(point_ids=ids, payload={"doc_version": 2})], batch_size=5)

    assert caught.value.points_written == 5
    assert COLLECTION in str(caught.value)
    assert "after 5 point(s) written" in str(caught.value)


def test_bad_update_status_is_a_write_error(proxy: Proxy) -> None:
    index = filled(proxy, 10)
    ids = tuple(state.point_id for state in index.scroll())

    def timed_out_on_second(method: Any, *args: Any, **kwargs: Any) -> Any:
        results = method(*args, **kwargs)
        if proxy.count_of("batch_update_points") == 2:
            return [
                models.UpdateResult(operation_id=1, status=models.UpdateStatus.WAIT_TIMEOUT)
                for _ in results
            ]
        return results

    proxy.override["batch_update_points"] = timed_out_on_second

    with pytest.raises(IndexWriteError, match="wait_timeout") as caught:
        index.set_payloads([PayloadWrite(point_ids=ids, payload={"doc_version": 2})], batch_size=4)

    assert caught.value.points_written == 4


def test_local_path_open_elsewhere_is_unavailable(tmp_path: Path) -> None:
    first = connect(path=str(tmp_path / "store"))
    try:
        with pytest.raises(IndexUnavailable, match="another process") as caught:
            connect(path=str(tmp_path / "store"))
        assert "Qdrant server" in str(caught.value)
        assert isinstance(caught.value.__cause__, RuntimeError)
    finally:
        first.close()
    second = connect(path=str(tmp_path / "store"))
    second.close()


def test_unreachable_server_is_unavailable_without_leaking_the_key(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    secret = "s3cr3t-api-key-value"
    caplog.set_level(logging.DEBUG)
    client = connect(url=f"http://127.0.0.1:{port}", api_key=secret, timeout=2)
    assert "plain http: the API key travels unencrypted" in caplog.text  # said once, in our log
    try:
        index = make_index(client)
        with pytest.raises(IndexUnavailable) as caught:
            index.exists()
        with pytest.raises(IndexUnavailable):
            list(index.scroll())
    finally:
        client.close()

    message = str(caught.value)
    assert "index.url" in message
    assert f"127.0.0.1:{port}" in message
    assert secret not in message
    assert secret not in repr(index)
    assert secret not in caplog.text


def test_url_credentials_are_redacted_from_messages() -> None:
    client = connect(url="http://user:hunter2@127.0.0.1:9", timeout=1)
    try:
        index = make_index(client)
        assert "hunter2" not in repr(index)
        with pytest.raises(IndexUnavailable) as caught:
            index.count()
        assert "hunter2" not in str(caught.value)
    finally:
        client.close()


def test_connect_needs_exactly_one_location(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exactly one"):
        connect()
    with pytest.raises(ValueError, match="exactly one"):
        connect(path=str(tmp_path), url="http://127.0.0.1:6333")


def test_payload_indexes_map_physical_paths_to_logical_keys(proxy: Proxy) -> None:
    keys = KeyMap(prefix="metadata.", renames={"version_state": "status"})
    index = make_index(proxy, keys)
    index.ensure_collection(dim=DIM)

    def with_schema(method: Any, *args: Any, **kwargs: Any) -> Any:
        info = method(*args, **kwargs)
        schema = {
            "metadata.status": models.PayloadIndexInfo(
                data_type=models.PayloadSchemaType.KEYWORD, points=0
            ),
            "metadata.effective_from": models.PayloadIndexInfo(
                data_type=models.PayloadSchemaType.DATETIME, points=0
            ),
            "version_state": models.PayloadIndexInfo(  # top level: not where the key lives
                data_type=models.PayloadSchemaType.KEYWORD, points=0
            ),
            "metadata.page": models.PayloadIndexInfo(
                data_type=models.PayloadSchemaType.INTEGER, points=0
            ),
        }
        return info.model_copy(update={"payload_schema": schema})

    proxy.override["get_collection"] = with_schema

    assert dict(index.payload_indexes()) == {
        "version_state": "keyword",
        "effective_from": "datetime",
    }


def test_create_payload_index_hides_the_local_mode_warning(
    client: QdrantClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    index = filled(client, 3)
    assert index.supports_payload_indexes is False
    # qdrant-client shows this warning once per process; forget that it was shown.
    monkeypatch.setattr(client_warnings, "SEEN_MESSAGES", set())

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        index.create_payload_index(key="doc_id", schema="keyword")
        monkeypatch.setattr(client_warnings, "SEEN_MESSAGES", set())
        with pytest.raises(UserWarning, match="no effect in the local Qdrant"):
            client.create_payload_index(COLLECTION, "doc_id", models.PayloadSchemaType.KEYWORD)


def test_create_payload_index_uses_the_physical_path(proxy: Proxy) -> None:
    index = make_index(proxy, KeyMap(prefix="metadata.", renames={"version_state": "status"}))
    index.ensure_collection(dim=DIM)

    index.create_payload_index(key="version_state", schema="keyword")

    (kwargs,) = [kw for name, kw in proxy.calls if name == "create_payload_index"]
    assert kwargs["field_name"] == "metadata.status"
    assert kwargs["field_schema"] == models.PayloadSchemaType.KEYWORD


def test_set_payload_uses_set_payload_operations_with_the_nest_key(proxy: Proxy) -> None:
    keys = KeyMap(prefix="a.b.", renames={"version_state": "status"})
    index = make_index(proxy, keys)
    index.ensure_collection(dim=DIM)
    index.upsert_chunks(
        ChunkRecord(
            point_id=r.point_id,
            chunk_id=r.chunk_id,
            text=r.text,
            vector=r.vector,
            payload=r.payload,
        )
        for r in records(3)
    )
    ids = tuple(state.point_id for state in index.scroll())

    index.set_payloads([PayloadWrite(point_ids=ids, payload={"version_state": "retired"})])

    (kwargs,) = [kw for name, kw in proxy.calls if name == "batch_update_points"]
    assert kwargs["wait"] is True
    (operation,) = kwargs["update_operations"]
    assert isinstance(operation, models.SetPayloadOperation)
    assert operation.set_payload.key == "a.b"
    assert operation.set_payload.payload == {"status": "retired"}
    names = {name for name, _ in proxy.calls}
    assert not names & {"overwrite_payload", "upsert_points", "delete", "update_vectors"}
    stored = proxy._client.retrieve(COLLECTION, [ids[0]], with_payload=True)[0].payload
    assert stored is not None
    assert stored["a"]["b"]["status"] == "retired"
    assert stored["a"]["b"]["doc_id"].startswith("src:doc-")


def test_ensure_collection_refuses_another_dimension(client: QdrantClient) -> None:
    index = make_index(client)
    index.ensure_collection(dim=DIM)

    with pytest.raises(ConfigError, match=r"ingest\.dim"):
        index.ensure_collection(dim=DIM + 1)


def test_missing_collection_reads_are_unavailable(client: QdrantClient) -> None:
    index = make_index(client)

    assert index.exists() is False
    with pytest.raises(IndexUnavailable, match="run ingestion first"):
        index.count()
    with pytest.raises(IndexUnavailable):
        index.facet(key="version_state")
