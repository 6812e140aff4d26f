"""What a body says replaces what: the sentences in which a document names the one it replaces
("This PEP supersedes PEP 241", "obsoletes RFC 822"), the one that replaces it ("superseded by
:pep:`426`", a ``.. superseded:: 292`` banner), or a replacement between two others ("PEP 409
(superseded by PEP 415)" in a third document's list).

A sentence counts when a replacing verb (supersede, replace, obsolete) has a reference as its
object and the one doing the replacing is known:

- **the subject** is the nearest thing before the verb, in the same sentence, that names a
  document: the document itself ("this PEP", "the current proposal", "it" opening a sentence,
  its own reference), or another reference ("PEP 426 (which would replace PEP 345)": a
  statement about PEP 426, not about the document reading it). A sentence with no such
  subject counts only when nothing else is said before the verb (a banner: "Superseded by
  RFC 2822", ``.. superseded:: 750``); "the ``<project>`` is replaced by the PEP 503
  normalized name" is about a project name, not a document. Inside a quotation ("PEP 649
  states: "this PEP supersedes PEP 563"", a ``>`` line) "this PEP" is the quoted document,
  not the one quoting it;
- **the object** is the reference right after the verb, and more of the same word in a list
  ("PEPs 513, 571 and 599", "PEP 397 ("Python launcher") and PEP 486"); a possessive ("replace
  PEP 634's literal patterns") is a part of the document, not the document;
- a **label** (``.. superseded:: 292``, ``Obsoletes: 822``) may give bare numbers: they name
  documents of the reading document's own kind (its reference word);
- it is not **denied** ("supplements rather than supersedes"), **partial** ("has partially
  been superseded by"), **joint** ("combined with PEP 345, the current proposal supersedes")
  or **split** ("superseded by PEP 345 and PEP 376"): a document is superseded by one
  document, so a replacement shared between two is for a person to read, not a link to
  propose.

The body is read up to ``MAX_CHARS`` characters (a long document says what it replaces
wherever it says it, and a PEP is under 200,000); past that the rest is not read, and the
claims say so (``Claims.capped``; the evidence of a proposal names the document). Only the
references found are kept. Reading is linear in the text read: every pattern is compiled
once, here, and each verb is weighed on a window of at most ``SENTENCE`` characters before it
and a bounded one after it (tests/unit/test_claims_linear.py counts the work per byte).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A reference: (word, number), as in ("pep", 345), ("rfc", 822).
Ref = tuple[str, int]

#: Words after "this" (or "the current") that mean the document itself.
DOCUMENT_NOUNS = frozenset(
    {"document", "doc", "page", "proposal", "memo", "note", "spec", "specification", "policy",
     "guide", "guideline", "guidelines", "standard", "version", "draft", "article", "procedure",
     "process", "runbook", "manual", "handbook", "notice", "revision", "edition", "text",
     "file", "record", "decision", "report", "paper"}
)  # fmt: skip
#: Words a banner may carry before its verb ("Note: now superseded by ..."): auxiliaries,
#: adverbs, statuses and months, nothing that could be another subject.
BANNER_WORDS = frozenset(
    {"has", "have", "had", "been", "was", "were", "is", "are", "be", "being", "will", "would",
     "shall", "should", "may", "might", "must", "can", "could", "now", "since", "hereby",
     "officially", "formally", "effectively", "entirely", "fully", "completely", "also",
     "already", "and", "then", "therefore", "thus", "note", "notes", "update", "updated",
     "notice", "status", "deprecated", "withdrawn", "rejected", "obsolete", "superseded",
     "replaced", "retired", "archived", "important", "warning", "caution", "attention", "as",
     "of", "on", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep", "oct", "nov",
     "dec", "january", "february", "march", "april", "june", "july", "august", "september",
     "october", "november", "december"}
)  # fmt: skip
#: The subject of a sentence about the document reading it.
SELF: Ref = ("", -1)
#: How far back a sentence is read for its subject.
SENTENCE = 300
#: The most characters of a body read for claims.
MAX_CHARS = 500_000

_ROLE = re.compile(r":([a-z]{2,12}):`(?:[^`<]*<)?0*([0-9]{1,6})[^`]*`")
#: A replacing verb, then "by"/"with" (passive), or a colon (a label: ``superseded::``).
_VERB = re.compile(r"\b(supersed|replac|obsolet)(\w*)(\s+(?:by|with)\b|\s*::?(?=\s))?")
_NEGATED = re.compile(r"\b(?:not|never|rather than|instead of|without|n't|nor)\W+(?:\w+\W+)?$")
_PARTIAL = re.compile(r"\b(?:partially|partly|in part|largely|mostly)\b")
_JOINT = re.compile(r"\b(?:combined|together|along|jointly)\s+with\b")
_OBJECT = re.compile(r"[\s(\"'*_`]*(?:the\s+|this\s+)?([a-z]{2,12})s?[\s#-]*0*([0-9]{1,6})\b")
_BARE = re.compile(r"[\s\"'*_`]*0*([0-9]{1,6})\b")
#: More of a list: a parenthesised or quoted title may sit between the items.
_MORE = re.compile(
    r"(?:\s*\([^()\n]{0,120}\)|\s*\"[^\"\n]{0,120}\")?"
    r"\s*(?:,|and\b|or\b|&)\s*(?:and\s+|or\s+)?(?:([a-z]{2,12})s?[\s#-]*)?0*([0-9]{1,6})\b"
)
_BOUNDARY = re.compile(r"[.!?;](?=\s)|\n[ \t]*\n|::|\n[ \t]*(?:[*+-]|#?[0-9]+[.)])[ \t]")
_POSSESSIVE = ("'s", "\u2019s")
#: Words before a number that name no kind of document ("replaced in 2019", "and 3").
_NOT_A_KIND = frozenset(
    {"a", "an", "and", "the", "of", "for", "to", "in", "on", "with", "by", "at", "or", "is", "as",
     "from", "since", "until", "after", "before"}
)  # fmt: skip
_AUX = r"(?:(?:has|have|had|been|was|is|will|would|now|also)\s+)*"
#: "this <word> [<word>]" / "the current <word> [<word>]": the document itself when one of
#: the words is a document noun (checked in Python: the nouns depend on the verb's object, and
#: a pattern per object would be compiled per sentence).
_THIS_NOUN = re.compile(r"\b(?:this|the\s+(?:current|present))(?=\s+([a-z]+)\b(?:\s+([a-z]+)\b)?)")
_THIS_END = re.compile(rf"\bthis\s+{_AUX}$")
_IT = re.compile(r"\W*it\b")
_A_REFERENCE = re.compile(r"\b([a-z]{2,13})[\s#-]*0*([0-9]{1,6})\b")
_WORD = re.compile(r"[a-z]+")


@dataclass(frozen=True, slots=True)
class Claims:
    """What one body says: the references it replaces, those that replace it, and the
    replacements it tells of between other documents, as (older, newer)."""

    replaces: frozenset[Ref] = frozenset()
    replaced_by: frozenset[Ref] = frozenset()
    between: frozenset[tuple[Ref, Ref]] = frozenset()
    #: ``MAX_CHARS`` when the body was longer and only that much of it was read, else None.
    capped: int | None = None


#: What a body that claims nothing says.
NOTHING = Claims()


def read_claims(text: str, own: Ref | None = None, *, max_chars: int = MAX_CHARS) -> Claims:
    """The claims of a body already folded to lower case (``signals.fold``); ``own`` is the
    reference the document is known by, if any. Only the first ``max_chars`` are read."""
    capped = max_chars if len(text) > max_chars else None
    text = _ROLE.sub(_role_reference, text[:max_chars])
    replaces: set[Ref] = set()
    replaced_by: set[Ref] = set()
    between: set[tuple[Ref, Ref]] = set()
    for verb in _VERB.finditer(text):
        passive = _passive(verb)
        if passive is None:
            continue
        before = text[max(0, verb.start() - 30) : verb.start()]
        if _NEGATED.search(before) or _PARTIAL.search(before):
            continue
        objects = _objects(text, verb, own)
        if not objects or (passive and len(objects) > 1):
            continue
        clause = _clause(text, verb.start())
        if _JOINT.search(clause):
            continue
        subject = _subject(clause, objects[0][0], own)
        if subject is None:
            continue
        for obj in objects:
            if subject in (SELF, own):
                (replaced_by if passive else replaces).add(obj)
            elif obj == own:
                (replaces if passive else replaced_by).add(subject)
            elif obj != subject:
                between.add((subject, obj) if passive else (obj, subject))
    if own is not None:
        replaces.discard(own)
        replaced_by.discard(own)
    if not (replaces or replaced_by or between or capped):
        return NOTHING  # shared: most bodies claim nothing, and an empty frozenset is 216 bytes
    return Claims(frozenset(replaces), frozenset(replaced_by), frozenset(between), capped)


def _role_reference(role: re.Match[str]) -> str:
    """``:pep:`345``` (or ``:rfc:`title <822>```) as the plain reference ``pep 345``."""
    return f"{role[1]} {role[2]}"


def _passive(verb: re.Match[str]) -> bool | None:
    """Whether the verb says its object replaces (True) or is replaced (False); None for a
    word that is no verb of replacing ("replacement:")."""
    suffix, after = verb[2], (verb[3] or "").strip()
    if after in ("by", "with"):
        return True
    if after.startswith(":"):  # a label: "superseded::" is passive, "obsoletes:" active
        return {"ed": True, "d": True, "es": False, "s": False}.get(suffix)
    return False


def _objects(text: str, verb: re.Match[str], own: Ref | None) -> list[Ref]:
    """The references the verb acts on (bare numbers only in a label, as the own word)."""
    found = _OBJECT.match(text, verb.end())
    label = (verb[3] or "").strip().startswith(":")
    if found is not None and not found[1].isdigit():
        word, first, at = found[1], int(found[2]), found.end()
    elif label and own is not None and (bare := _BARE.match(text, verb.end())) is not None:
        word, first, at = own[0], int(bare[1]), bare.end()
    else:
        return []
    if text.startswith(_POSSESSIVE, at) or word in _NOT_A_KIND:
        return []
    if word.endswith("s") and own is not None and word[:-1] == own[0]:
        word = own[0]  # "PEPs 513, 571 and 599"
    objects = [(word, first)]
    while (more := _MORE.match(text, at)) is not None and more[1] in (None, word):
        objects.append((word, int(more[2])))
        at = more.end()
    return objects


def _clause(text: str, end: int) -> str:
    """The sentence before ``end``: from the last boundary (a full stop, a blank line, a list
    item, a directive's ``::``) within ``SENTENCE`` characters."""
    start = max(0, end - SENTENCE)
    for boundary in _BOUNDARY.finditer(text, start, end):
        start = boundary.end()
    return text[start:end]


def _subject(clause: str, word: str, own: Ref | None) -> Ref | None:
    """Who does the replacing: ``SELF``, another reference, or None (someone else, or no one
    named where a banner would need nothing)."""
    nouns = DOCUMENT_NOUNS | {word} | ({own[0]} if own else set())
    quoted = _quoted_from(clause)
    candidates: list[tuple[int, Ref]] = []
    for found in _THIS_NOUN.finditer(clause):
        if found[2] in nouns:  # "this new policy": the second word is the noun
            candidates.append((found.end(2), SELF))
        elif found[1] in nouns:
            candidates.append((found.end(1), SELF))
    if (this := _THIS_END.search(clause)) is not None:
        candidates.append((this.end(), SELF))
    if (it := _IT.match(clause)) is not None:
        candidates.append((it.end(), SELF))
    # the quoted words speak for the quoted document: "this PEP" there is not this one
    candidates = [(at, who) for at, who in candidates if quoted is None or at <= quoted]
    candidates += [
        (found.end(), (word, int(found[2])))
        for found in _A_REFERENCE.finditer(clause)
        if found[1] in (word, word + "s")
    ]
    if candidates:
        return max(candidates, key=lambda c: c[0])[1]
    words = _WORD.findall(clause)
    return SELF if quoted is None and all(w in BANNER_WORDS for w in words) else None


def _quoted_from(clause: str) -> int | None:
    """Where a quotation the verb stands in opens (an unclosed double quote, a ``>`` line),
    or None."""
    line = clause.rfind("\n") + 1
    if clause[line:].lstrip().startswith(">"):
        return line
    if clause.count('"') % 2:
        return clause.rfind('"')
    if clause.count("\u201c") > clause.count("\u201d"):
        return clause.rfind("\u201c")
    return None
