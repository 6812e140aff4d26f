"""From the points' timelines (``replay``) to the two answers of ``reconciler audit``:

- ``served_at``: what each point of the documents asked about held at an instant ``T`` of the
  log, and so whether ``default_filter(as_of=T)`` admitted it then. The filter is judged in
  Python (``admits``: the same terms the engines' renderings are built from) on the payload
  the point held; a point the log is unsure of (a write under way, a change made outside the
  reconciler, a payload not recorded) is *undetermined* unless every payload it may have held
  gives the same answer;
- ``history_of``: each version's periods over the log (what its points held from when to
  when, who changed it), and the stretches of time in which the default filter admitted it.

Two times meet here: ``T`` is an instant of the log (which payloads stood then), and the
filter then evaluates those payloads' effective windows at ``T``. Pure: timelines in, plain
JSON-ready values out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from itertools import pairwise
from typing import Any

from reconciler.model import parse_instant, rfc3339
from reconciler.trail.replay import (
    FAMILY,
    PAYLOAD,
    WHY_TEXT,
    Cause,
    Held,
    Replay,
    Span,
    owned_spans,
    payload_dict,
)

#: ``admits(payload, as_of)``: whether ``default_filter(as_of=as_of)`` admits a chunk holding
#: this managed payload (``reconciler.filters.FilterTerms.admits``).
Admits = Callable[[Mapping[str, Any], datetime], bool]


def merged(spans: Iterable[Span]) -> list[Span]:
    """Spans with adjacent ones that hold the same merged (the first one's reason kept)."""
    out: list[Span] = []
    for span in spans:
        if out and out[-1].held == span.held:
            continue
        out.append(span)
    return out


def span_at(spans: list[Span], instant: datetime) -> Span | None:
    """The span in force at ``instant``."""
    found = None
    for span in spans:
        if span.start is not None and span.start > instant:
            break
        found = span
    return found


def verdict(held: tuple[Held, ...], instant: datetime, admits: Admits) -> bool | None:
    """Whether the filter admitted a point holding one of ``held`` at ``instant``: ``None``
    when the log cannot tell (an unknown payload, or two payloads judged differently)."""
    answers = set()
    for one in held:
        if one.kind == PAYLOAD:
            assert one.payload is not None
            answers.add(admits(payload_dict(one.payload), instant))
        elif one.kind == "absent":
            answers.add(False)
        else:
            return None
    return answers.pop() if len(answers) == 1 else None


def cause_json(cause: Cause | None) -> dict[str, Any] | None:
    if cause is None:
        return None
    return {
        "seq": cause.seq,
        "at": rfc3339(cause.at),
        "run_id": cause.run_id,
        "actor": cause.actor,
        "reason": cause.reason,
    }


def held_json(held: tuple[Held, ...]) -> list[dict[str, Any] | None]:
    """What a span may have held: payloads, ``None`` for no point; unknown is left out."""
    return [
        payload_dict(one.payload) if one.payload is not None else None
        for one in held
        if one.kind != "unknown"
    ]


def _families(replay: Replay, doc_id: str, span: Span) -> set[str]:
    """The families a point is counted in at a span: those its payload(s) name, and, where it
    held no payload the log knows (unknown, or no point), those the document's payloads named
    anywhere in the log."""
    named = {
        str(one.payload[FAMILY])
        for one in (*span.held, *([Held(PAYLOAD, span.hint)] if span.hint else []))
        if one.payload is not None and one.payload[FAMILY] is not None
    }
    if any(one.kind != PAYLOAD for one in span.held):
        named |= replay.families_of.get(doc_id, set())
    return named


def in_scope(replay: Replay, doc_id: str, span: Span, families: set[str], docs: set[str]) -> bool:
    return doc_id in docs or bool(families & _families(replay, doc_id, span))


def served_at(
    replay: Replay,
    *,
    at: datetime,
    families: set[str],
    docs: set[str],
    admits: Admits,
) -> list[dict[str, Any]]:
    """Per document in scope at ``at``: what its points held and whether the filter admitted
    them (JSON-ready; documents by family, version, id)."""
    documents = []
    for doc_id, keys in replay.points_of.items():
        variants: dict[tuple[Any, ...], dict[str, Any]] = {}
        counts: Counter[str] = Counter()
        for key in keys:
            timeline = replay.timelines[key]
            span = span_at(merged(owned_spans(timeline, doc_id)), at)
            if span is None or span.why == "renamed":
                continue  # (a re-keying: the point answered under another id then)
            if not in_scope(replay, doc_id, span, families, docs):
                continue
            if span.status == "absent":
                counts["absent"] += 1
                continue
            admitted = verdict(span.held, at, admits)
            counts[
                "served" if admitted else "not_served" if admitted is False else "undetermined"
            ] += 1
            group = (span.held, span.why, span.start, span.cause, admitted, span.hint)
            variant = variants.get(group)
            if variant is None:
                variant = variants[group] = {
                    "status": span.status,
                    "admitted": admitted,
                    "payloads": held_json(span.held),
                    "since": rfc3339(span.start) if span.start else None,
                    "why": span.why,
                    "explained": WHY_TEXT.get(span.why, span.why),
                    "by": cause_json(span.cause),
                    "first_known": payload_dict(span.hint) if span.hint else None,
                    "points": [],
                }
            variant["points"].append(timeline.point_id)
        if not variants and not counts:
            continue
        documents.append(_document(doc_id, list(variants.values()), counts))
    documents.sort(key=lambda d: (str(d["family"]), _order(d["version"]), d["doc_id"]))
    return documents


def _order(version: Any) -> tuple[int, Any]:
    return (0, version) if isinstance(version, int) else (1, str(version))


def _document(doc_id: str, variants: list[dict[str, Any]], counts: Counter[str]) -> dict[str, Any]:
    """One document's answer: its version as most of its points held it, and a verdict."""
    known = [v for v in variants if v["status"] == "known"]
    main = max(known, key=lambda v: len(v["points"]), default=None)
    shown = main["payloads"][0] if main else {}
    if not shown:
        hinted = next((v["first_known"] for v in variants if v["first_known"]), None)
        doubted = next((p for v in variants for p in v["payloads"] if p), None)
        shown = hinted or doubted or {}
    served, not_served = counts["served"], counts["not_served"]
    undetermined = counts["undetermined"]
    if undetermined:
        said = "undetermined"
    elif served and not_served:
        said = "partly"
    else:
        said = "yes" if served else "no"
    return {
        "doc_id": doc_id,
        "family": shown.get("doc_family_id"),
        "version": shown.get("doc_version"),
        "version_state": shown.get("version_state"),
        "effective_from": shown.get("effective_from"),
        "effective_to": shown.get("effective_to"),
        "quarantined": shown.get("quarantined"),
        "served": said,
        "chunks": {
            "served": served,
            "not_served": not_served,
            "undetermined": undetermined,
            "absent": counts["absent"],
        },
        "variants": sorted(variants, key=lambda v: -len(v["points"])),
    }


# -- history ----------------------------------------------------------------------------------


def history_of(
    replay: Replay,
    *,
    families: set[str],
    docs: set[str],
    admits: Admits,
    until: datetime,
) -> list[dict[str, Any]]:
    """Per document in scope at any time: its periods (what its points held, from when to
    when, and who changed it) and the stretches until ``until`` in which the default filter
    admitted it, for certain or perhaps."""
    out = []
    for doc_id, keys in replay.points_of.items():
        timelines = [merged(owned_spans(replay.timelines[key], doc_id)) for key in keys]
        if not any(in_scope(replay, doc_id, s, families, docs) for t in timelines for s in t):
            continue
        periods = _periods(timelines)
        if not periods:
            continue
        out.append(
            {
                "doc_id": doc_id,
                **_identity(periods),
                "periods": [_period_json(p) for p in periods],
                "served": _served_stretches(periods, admits, until),
            }
        )
    out.sort(key=lambda d: (str(d["family"]), _order(d["version"]), d["doc_id"]))
    return out


#: One period of a document: from, to (``None``: open), what its points held (each variant
#: and how many points), and the entry that began it.
Period = tuple[datetime | None, datetime | None, Counter[tuple[tuple[Held, ...], str]], Any]


def _periods(timelines: list[list[Span]]) -> list[Period]:
    starts = sorted({s.start for t in timelines for s in t if s.start is not None})
    bounds: list[datetime | None] = [None, *starts]
    periods: list[Period] = []
    for n, start in enumerate(bounds):
        end = bounds[n + 1] if n + 1 < len(bounds) else None
        held: Counter[tuple[tuple[Held, ...], str]] = Counter()
        cause = None
        for spans in timelines:
            span = spans[0] if start is None else span_at(spans, start)
            if span is None or (start is None and span.start is not None):
                continue
            held[(span.held, span.why)] += 1
            if span.start == start and span.cause is not None:
                cause = span.cause
        if not periods and all(h == (_ABSENT,) for (h, _why) in held):
            continue  # not created yet: the document's history starts with its points
        if not held:
            continue
        if periods and _what(periods[-1][2]) == _what(held):
            previous = periods[-1]
            periods[-1] = (previous[0], end, previous[2], previous[3])
            continue
        periods.append((start, end, held, cause))
    return periods


_ABSENT = Held("absent")


def _what(held: Counter[tuple[tuple[Held, ...], str]]) -> Counter[tuple[Held, ...]]:
    """What a period's points held, however each came to hold it."""
    found: Counter[tuple[Held, ...]] = Counter()
    for (variant, _why), count in held.items():
        found[variant] += count
    return found


def _identity(periods: list[Period]) -> dict[str, Any]:
    """The family and version of a document, from the latest payload its points held."""
    for _start, _end, held, _cause in reversed(periods):
        for (variant, _why), _n in held.most_common():
            for one in variant:
                if one.payload is not None:
                    shown = payload_dict(one.payload)
                    return {"family": shown["doc_family_id"], "version": shown["doc_version"]}
    return {"family": None, "version": None}


def _period_json(period: Period) -> dict[str, Any]:
    start, end, held, cause = period
    return {
        "from": rfc3339(start) if start else None,
        "to": rfc3339(end) if end else None,
        "by": cause_json(cause),
        "variants": [
            {
                "status": _status(variant),
                "payloads": held_json(variant),
                "why": why,
                "points": count,
            }
            for (variant, why), count in held.most_common()
        ],
    }


def _status(held: tuple[Held, ...]) -> str:
    if len(held) > 1:
        return "in_doubt"
    return "known" if held[0].kind == PAYLOAD else held[0].kind


def _served_stretches(
    periods: list[Period], admits: Admits, until: datetime
) -> list[dict[str, Any]]:
    """The stretches of log time (up to ``until``) in which the filter admitted some point
    of the document: ``certain`` when every point it counts was surely admitted."""
    stretches: list[dict[str, Any]] = []
    for start, end, held, _cause in periods:
        if start is None:
            continue  # before the log's first word on the document: not known
        stop = min(end, until) if end is not None else until
        if stop <= start:
            continue
        cuts = {start, stop}
        for variant, _why in held:
            for one in variant:
                if one.payload is not None:
                    cuts |= _window_cuts(payload_dict(one.payload), start, stop)
        marks = sorted(cuts)
        for a, b in pairwise(marks):
            sure = maybe = 0
            for (variant, _why), count in held.items():
                answer = verdict(variant, a, admits)
                sure += count if answer else 0
                maybe += count if answer is None else 0
            if not sure and not maybe:
                continue
            last = stretches[-1] if stretches else None
            same = last is not None and last["to"] == rfc3339(a)
            if (
                same
                and last is not None
                and (last["points"], last["undetermined"])
                == (
                    sure,
                    maybe,
                )
            ):
                last["to"] = rfc3339(b)
                continue
            stretches.append(
                {"from": rfc3339(a), "to": rfc3339(b), "points": sure, "undetermined": maybe}
            )
    return stretches


def _window_cuts(payload: Mapping[str, Any], start: datetime, stop: datetime) -> set[datetime]:
    """The instants inside ``(start, stop)`` where the filter's answer on ``payload`` may
    change: its effective window's ends."""
    cuts = set()
    for key in ("effective_from", "effective_to"):
        value = payload.get(key)
        if not isinstance(value, str):
            continue
        try:
            instant = parse_instant(value)
        except (ValueError, OverflowError):
            continue
        if start < instant < stop:
            cuts.add(instant)
    return cuts
