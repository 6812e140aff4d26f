"""The contract suite every system-of-record connector's tests run.

Subclass it in a test module (the subclass name starts with ``Test`` so pytest collects it; this
base class does not) and provide two fixtures::

    class TestVaultContract(SystemOfRecordContract):
        @pytest.fixture
        def source(self, tmp_path):          # >= 3 documents, one superseded by another
            ...

        @pytest.fixture
        def unavailable_source(self, tmp_path):  # the same connector, pointed at nothing
            ...

Override ``expected_hash`` when a connector's ``content_hash`` is not the sha256 of the body
that ``read_body`` returns (for example, a hash the source system computes itself).
"""

from __future__ import annotations

import hashlib
import re

import pytest

from connectors.base import DocumentUnreadable, SourceUnavailable, SystemOfRecord
from reconciler.model import SourceSnapshot

__all__ = ["SystemOfRecordContract"]

_HASH = re.compile(r"sha256:[0-9a-f]{64}")


class SystemOfRecordContract:
    """Behaviour every ``SystemOfRecord`` honours; subclass it with the two fixtures."""

    @pytest.fixture
    def source(self) -> SystemOfRecord:
        """A connector over a small healthy corpus: >= 3 documents, one superseded by another."""
        raise NotImplementedError("the contract subclass provides the 'source' fixture")

    @pytest.fixture
    def unavailable_source(self) -> SystemOfRecord:
        """The same connector pointed at something that cannot be read at all."""
        raise NotImplementedError("the contract subclass provides 'unavailable_source'")

    def expected_hash(self, body: str) -> str | None:
        """The ``content_hash`` a document with this body must carry; None skips the check."""
        return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()

    def test_is_a_system_of_record(self, source: SystemOfRecord) -> None:
        assert isinstance(source, SystemOfRecord)
        assert isinstance(source.name, str)
        assert source.name

    def test_scan_returns_a_snapshot_of_this_source(self, source: SystemOfRecord) -> None:
        snapshot = source.scan()
        assert isinstance(snapshot, SourceSnapshot)
        assert snapshot.source == source.name
        assert all(doc.source == source.name for doc in snapshot.documents)
        assert all(problem.source == source.name for problem in snapshot.problems)

    def test_fixture_corpus_is_big_enough(self, source: SystemOfRecord) -> None:
        snapshot = source.scan()
        assert len(snapshot.documents) >= 3
        assert any(doc.superseded_by is not None for doc in snapshot.documents)

    def test_doc_ids_are_prefixed_and_unique(self, source: SystemOfRecord) -> None:
        documents = source.scan().documents
        doc_ids = [doc.doc_id for doc in documents]
        assert all(doc_id.startswith(f"{source.name}:") for doc_id in doc_ids)
        assert len(set(doc_ids)) == len(doc_ids)
        keys = [doc.source_key for doc in documents]
        assert len(set(keys)) == len(keys)

    def test_content_hashes_are_sha256(self, source: SystemOfRecord) -> None:
        for doc in source.scan().documents:
            assert _HASH.fullmatch(doc.content_hash), doc.content_hash

    def test_scan_is_deterministic(self, source: SystemOfRecord) -> None:
        first, second = source.scan(), source.scan()
        assert first.documents == second.documents
        assert first.problems == second.problems

    def test_read_body_matches_content_hash(self, source: SystemOfRecord) -> None:
        for doc in source.scan().documents:
            body = source.read_body(doc.source_key)
            assert isinstance(body, str)
            expected = self.expected_hash(body)
            if expected is not None:
                assert doc.content_hash == expected, doc.doc_id

    def test_read_body_of_unknown_key_raises(self, source: SystemOfRecord) -> None:
        source.scan()
        with pytest.raises(DocumentUnreadable):
            source.read_body("no-such-document-7f3a9c")

    def test_superseded_by_names_a_document_of_the_snapshot(self, source: SystemOfRecord) -> None:
        documents = source.scan().documents
        doc_ids = {doc.doc_id for doc in documents}
        for doc in documents:
            if doc.superseded_by is not None:
                assert doc.superseded_by in doc_ids, doc.doc_id
                assert doc.superseded_by != doc.doc_id

    def test_unavailable_source_raises_rather_than_looking_empty(
        self, unavailable_source: SystemOfRecord
    ) -> None:
        with pytest.raises(SourceUnavailable):
            unavailable_source.scan()
