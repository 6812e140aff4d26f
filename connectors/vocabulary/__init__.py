"""A source's own vocabulary, read by configuration alone: which files are documents, where
their metadata is written, in which words, and how their links are spelled.

Shared by the connectors whose documents are files (the vault folder, the git repository).
Real systems of record do not speak the project's frontmatter: the PEPs open with an RFC 822
header block (``Status: Superseded``, ``Superseded-By: 600``, ``Created: 05-Jul-2001``),
Kubernetes KEPs keep a ``kep.yaml`` beside each ``README.md``, ADRs write ``Superseded by
[ADR-0012](0012-....md)`` in the body. ``VocabularyOptions`` declares how to read one of them
(docs/connectors/mapping.md); ``Vocabulary`` is its compiled, immutable form, and
``Vocabulary.read`` turns one file's bytes (and its sidecar's) into a ``Note``. Without options,
a vault or git source reads YAML frontmatter under the project's own key names, as always.

The package: ``options`` (the options, checked at load), ``document`` (which files, and one
file read into a ``Note``), ``readers`` (the header block, the sidecar, the body lines),
``fields`` (the names they share). Pure: bytes in, notes out; no file system, no subprocess. A note whose identity cannot be
known raises ``NoteRefused``; one invalid field is recorded in ``Note.invalid`` and taken as
absent (a registered document keeps its registered value). Links are kept raw here and
resolved across the source by ``connectors.linking``.
"""

from connectors.vocabulary.document import Link, Note, Vocabulary
from connectors.vocabulary.fields import FIELDS, READERS, glob_problem
from connectors.vocabulary.options import VocabularyOptions, vocabulary_rules

__all__ = [
    "FIELDS",
    "READERS",
    "Link",
    "Note",
    "Vocabulary",
    "VocabularyOptions",
    "glob_problem",
    "vocabulary_rules",
]
