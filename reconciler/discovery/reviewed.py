"""A reviewed proposals file read back: the bytes read safely (``safe_yaml``), then checked
against a typed schema (pydantic) that lists every problem with the line it is on, so a person
can mend the file in one pass. Nothing of a file is taken unless all of it is right.

The schema is the one ``Proposals.as_dict`` writes (``suggest -o``): unknown keys are refused (a
misspelt ``decison: accept`` would otherwise leave a proposal silently undecided), numbers are
numbers (``min_score: abc`` is an error, not a traceback), a document id and the evidence have a
length limit, and a proposal id appears once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from reconciler.discovery.proposals import (
    DIRECTED,
    FORMAT,
    NO_DIRECTION,
    Proposal,
    Proposals,
    ProposalsError,
)
from reconciler.discovery.safe_yaml import MAX_BYTES, Loaded, UnsafeYaml, load_text, text_of

__all__ = ["DOC_ID_MAX", "EVIDENCE_MAX", "load_reviewed", "read_reviewed"]

#: The longest document id read.
DOC_ID_MAX = 1024
#: The longest evidence read (``suggest`` writes a line of a few hundred characters).
EVIDENCE_MAX = 10_000
#: At most this many schema problems are listed (then how many more there were).
MAX_LISTED = 50

DocId = Annotated[str, Field(min_length=1, max_length=DOC_ID_MAX)]
Score = Annotated[float, Field(allow_inf_nan=False)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class _Link(_Model):
    id: DocId
    kind: Literal["link"]
    older: DocId
    newer: DocId
    direction: Literal["older -> newer", "no direction"]
    score: Score
    evidence: Annotated[str, Field(max_length=EVIDENCE_MAX)] = ""
    decision: Literal["accept", "reject", "undecided"] = "undecided"

    @model_validator(mode="after")
    def _two_documents(self) -> _Link:
        if self.older == self.newer:
            raise ValueError("a document can't replace itself (older and newer are one)")
        return self


class _Family(_Model):
    id: DocId
    kind: Literal["family"]
    members: Annotated[list[DocId], Field(min_length=2)]
    links: list[DocId] = []
    score: Score
    evidence: Annotated[str, Field(max_length=EVIDENCE_MAX)] = ""
    decision: Literal["accept", "reject", "undecided"] = "undecided"


class _File(_Model):
    format: Literal["reconciler-proposals/1"]
    min_score: Score = 0.0
    documents: Annotated[int, Field(ge=0)] = 0
    pairs_scored: Annotated[int, Field(ge=0)] = 0
    notes: list[Annotated[str, Field(max_length=EVIDENCE_MAX)]] = []
    proposals: list[Annotated[_Link | _Family, Field(discriminator="kind")]]


assert FORMAT == "reconciler-proposals/1"  # (the Literals above spell them out)
assert (DIRECTED, NO_DIRECTION) == ("older -> newer", "no direction")


def load_reviewed(path: Path, *, max_bytes: int = MAX_BYTES) -> Proposals:
    """The reviewed proposals file at ``path``; ``ProposalsError`` lists every problem (by line)."""
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ProposalsError([f"the file is {size:,} bytes; at most {max_bytes:,} are read"])
        with path.open("rb") as f:
            raw = f.read(max_bytes + 1)
    except OSError as exc:
        raise ProposalsError([f"could not read it: {exc.strerror or exc}"]) from None
    try:
        text = text_of(raw, max_bytes=max_bytes)
        # (read without the line of every key first: at 100,000 proposals those are 900,000
        # paths, a second of CPU and 170 MB; only a file with problems needs them)
        loaded = load_text(text)
    except UnsafeYaml as exc:
        raise ProposalsError(exc.problems) from None
    try:
        return read_reviewed(loaded)
    except ProposalsError:
        # (the same problems, each with its line: the file read again with them; ``lines``
        # changes nothing else ``load_text`` gives)
        return read_reviewed(load_text(text, lines=True))


def read_reviewed(loaded: Loaded | Mapping[str, Any]) -> Proposals:
    """Read data (with its lines, when it came from a file) against the schema."""
    if not isinstance(loaded, Loaded):
        loaded = Loaded(loaded)
    data = loaded.data
    if not isinstance(data, Mapping):
        raise ProposalsError(
            [f"expected a mapping with 'format' and 'proposals', found {_kind(data)}"]
        )
    try:
        model = _File.model_validate(data)
    except ValidationError as exc:
        raise ProposalsError(_listed(_problems(exc, loaded))) from None
    problems = _repeated_ids(model, loaded)
    if problems:
        raise ProposalsError(_listed(problems))
    return Proposals(
        proposals=tuple(_proposal(p) for p in model.proposals),
        min_score=model.min_score,
        documents=model.documents,
        pairs_scored=model.pairs_scored,
        notes=tuple(model.notes),
    )


def _proposal(p: _Link | _Family) -> Proposal:
    # (built at once: id, kind, score, evidence and decision in their order, then the kind's)
    if isinstance(p, _Link):
        link = (p.id, "link", p.score, p.evidence, p.decision)
        return Proposal(*link, older=p.older, newer=p.newer, direction=p.direction)
    family = (p.id, "family", p.score, p.evidence, p.decision)
    return Proposal(*family, members=tuple(p.members), links=tuple(p.links))


def _repeated_ids(model: _File, loaded: Loaded) -> list[str]:
    first: dict[str, int] = {}
    problems = []
    for n, p in enumerate(model.proposals):
        if p.id in first:
            problems.append(
                f"{_at(loaded, ('proposals', n, 'id'))}proposals[{n}].id: {p.id!r} again "
                f"(first at proposals[{first[p.id]}]): each proposal is named once"
            )
        else:
            first[p.id] = n
    return problems


def _problems(exc: ValidationError, loaded: Loaded) -> list[str]:
    problems = []
    for error in exc.errors(include_url=False):
        loc = _located(error["loc"])
        where = _dotted(loc) or "the file"
        found = "" if error["type"] == "missing" else f", found {_shown(error.get('input'))}"
        message = error["msg"]
        if error["type"] == "extra_forbidden":
            message, found = "not a field of a proposals file (misspelt?)", ""
        problems.append(f"{_at(loaded, loc)}{where}: {message}{found}")
    return problems


def _located(loc: Sequence[str | int]) -> tuple[str | int, ...]:
    """A pydantic location without the tag of the union it went through (``link``/``family``
    after ``proposals[n]``)."""
    out: list[str | int] = []
    for n, part in enumerate(loc):
        if n == 2 and loc[0] == "proposals" and part in ("link", "family"):
            continue
        out.append(part)
    return tuple(out)


def _dotted(loc: Sequence[str | int]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _at(loaded: Loaded, loc: Sequence[str | int]) -> str:
    line = loaded.line_of(loc)
    return f"line {line}: " if line is not None else ""


def _shown(value: Any) -> str:
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = ascii(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _kind(value: Any) -> str:
    if value is None:
        return "an empty file"
    return _shown(value)


def _listed(problems: list[str]) -> list[str]:
    if len(problems) <= MAX_LISTED:
        return problems
    return [*problems[:MAX_LISTED], f"... and {len(problems) - MAX_LISTED} more problem(s)"]
