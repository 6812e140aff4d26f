"""What the rollback tests build their histories from (the unit fold and the paged rollback)."""

from __future__ import annotations

from reconciler.model import OPEN_END, Document, VersionState


def document(doc_id: str, doc_class: str) -> Document:
    """A current document of its own family, its class ``doc_class`` (what runs change)."""
    return Document(
        doc_id=doc_id,
        source="h",
        source_key=doc_id,
        doc_family_id=doc_id,
        doc_version=1,
        version_state=VersionState.CURRENT,
        effective_to=OPEN_END,
        doc_class=doc_class,
    )
