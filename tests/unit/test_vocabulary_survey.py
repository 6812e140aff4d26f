"""What ``reconciler vocabulary check`` counts per mapped field (connectors/vocabulary/survey.py):
found, ambiguous (readers that disagree, several values for one), invalid (taken as absent),
missing; which fields are surveyed; which count as read from no document. Notes are read from
bytes by the real vocabulary."""

from __future__ import annotations

from test_vocabulary import vocabulary

from connectors.vocabulary.survey import (
    FieldCount,
    field_counts,
    readings,
    surveyed_fields,
    unread_fields,
)


def test_each_document_counts_once_per_field_in_one_column() -> None:
    vocab = vocabulary(
        readers=["frontmatter", "headers"],
        fields={"status": "Status", "title": "Title", "effective_from": "Created"},
        status_map={"Final": "current"},
    )
    notes = [
        vocab.read("a.md", b"Status: Final\nTitle: A\nCreated: 2020-01-01\n\nBody.\n"),
        # the frontmatter says one thing, the header block another: ambiguous
        vocab.read("b.md", b"---\nStatus: Final\n---\nStatus: Draft\nTitle: B\n\nBody.\n"),
        # a status no mapping names and a date no format reads: invalid
        vocab.read("c.md", b"Status: Wobbly\nTitle: C\nCreated: soon\n\nBody.\n"),
        vocab.read("d.md", b"# no metadata at all\n"),
    ]
    counts = {c.field: c for c in field_counts(vocab, notes)}
    assert counts["status"] == FieldCount("status", ("Status",), 1, 1, 1, 1)
    assert counts["title"] == FieldCount("title", ("Title",), 3, 0, 0, 1)
    assert counts["effective_from"] == FieldCount("effective_from", ("Created",), 1, 0, 1, 2)
    assert all(c.read + c.missing == len(notes) for c in counts.values())
    assert readings(notes[1])["status"] == {"frontmatter": "Final", "headers": "Draft"}


def test_body_pattern_groups_are_surveyed_and_link_fields_are_exempt_unless_written() -> None:
    vocab = vocabulary(
        readers=["body"],
        body_patterns=["^Status: (?P<status>\\w+)$", "^Superseded by (?P<superseded_by>.+)$"],
    )
    assert surveyed_fields(vocab) == {
        "status": ("body_patterns",),
        "superseded_by": ("body_patterns",),
    }
    notes = [vocab.read("a.md", b"Nothing here.\n")]
    counts = field_counts(vocab, notes)
    assert unread_fields(counts) == ["status"]  # a young corpus has no supersession
    assert unread_fields(counts, ["superseded_by"]) == ["status", "superseded_by"]
