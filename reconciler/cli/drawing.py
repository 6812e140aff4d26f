"""Drawing what ``reconciler audit served`` and ``audit history`` return: text for people
(``render_served``, ``render_history``) and a timeline picture (``history_svg``).

The picture is plain SVG, written by hand (a few rectangles, lines and words; no drawing
library): one block a family, one lane a version. In a lane, each period of the version's
payload history is a bar over its effective window (``effective_from`` to ``effective_to``),
coloured by its ``version_state``, with a mark where the log recorded it; under them, a band
shows when the default filter actually admitted the version (log time). One time axis for
all: effective dates and the log's instants are both instants.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any
from xml.sax.saxutils import escape

from reconciler.cli.rendering import table
from reconciler.model import parse_instant

#: Fill of a bar by ``version_state``.
STATE_COLOURS: dict[str, str] = {
    "current": "#2f9e44",
    "pending": "#1971c2",
    "unknown": "#0c8599",
    "draft": "#f08c00",
    "superseded": "#adb5bd",
    "retired": "#495057",
}
UNDETERMINED = "#e8590c"
SERVED = "#212529"
QUARANTINED = "#e03131"

WIDTH = 1100
LEFT = 250  # the labels' column
RIGHT = 30
BAR = 14
GAP = 6
FONT = "font-family='DejaVu Sans, Verdana, sans-serif'"
#: Roughly how wide a character of the labels is (11 px text).
CHAR = 6.3


# -- text ------------------------------------------------------------------------------------


def _day(value: Any) -> str:
    """A payload instant, short: the open ends in words, a midnight as its date."""
    if not isinstance(value, str):
        return "-" if value is None else str(value)
    if value.startswith("9999-12-31"):
        return "open"
    if value.startswith("0001-01-01"):
        return "always"
    return value[:10] if value[10:] in ("T00:00:00Z", "") else value


def _by(cause: Mapping[str, Any] | None) -> str:
    if not cause:
        return ""
    return f"run {str(cause['run_id'])[:8]} ({cause['actor']}: {cause['reason']})"


def render_served(data: dict[str, Any]) -> str:
    """``audit served`` for people: per family, each version's payload at the instant, and
    whether the default filter admitted its chunks."""
    log = data["log"]
    out = [
        f"what default_filter(as_of={data['at']}) admitted at {data['at']}, from the audit log "
        f"({log['entries']} entries verified, {log['first_at']} to {log['last_at']})",
        "",
    ]
    rows = []
    for document in data["documents"]:
        chunks = document["chunks"]
        counted = chunks["served"] + chunks["not_served"] + chunks["undetermined"]
        rows.append(
            [
                document["family"],
                document["doc_id"],
                document["version"],
                document["version_state"],
                _day(document["effective_from"]),
                _day(document["effective_to"]),
                "yes" if document["quarantined"] else "no",
                document["served"],
                f"{chunks['served']}/{counted}"
                + (f" ({chunks['undetermined']} undetermined)" if chunks["undetermined"] else ""),
            ]
        )
    out.append(
        table(
            ["family", "doc", "version", "state", "from", "to", "quarantined", "served", "chunks"],
            rows,
        )
    )
    out += ["", "since:"]
    for document in data["documents"]:
        for variant in document["variants"]:
            since = variant["since"] or "the log's first word on it"
            what = variant["explained"]
            count = len(variant["points"])
            out.append(
                f"  {document['doc_id']}: {count} chunk(s) {_verdict(variant['admitted'])}, "
                f"since {since}: {what}" + (f", {_by(variant['by'])}" if variant["by"] else "")
            )
            if variant["status"] == "in_doubt":
                out.append(
                    "      one of: " + " | ".join(_payload_words(p) for p in variant["payloads"])
                )
    out += ["", "this answer rests on:"]
    out += [f"  - {line}" for line in data["basis"]]
    return "\n".join(out)


def _verdict(admitted: bool | None) -> str:
    return {True: "served", False: "not served", None: "undetermined"}[admitted]


def _payload_words(payload: Mapping[str, Any] | None) -> str:
    if payload is None:
        return "no point"
    words = f"{payload.get('version_state')} {_day(payload.get('effective_from'))}"
    words += f" -> {_day(payload.get('effective_to'))}"
    return words + (" quarantined" if payload.get("quarantined") else "")


def _either(variant: Mapping[str, Any], key: str, shown: Any) -> str:
    """A cell of a period's variant: its value, or each value it may have had (``|``), "none"
    for no point; an unknown payload is ``?``."""
    if variant["status"] == "unknown":
        return "?"
    values = ["none" if p is None else shown(p.get(key)) for p in variant["payloads"]]
    return " | ".join(dict.fromkeys(values)) if values else "?"


def render_history(data: dict[str, Any]) -> str:
    """``audit history`` for people: per version, each period of what its chunks held."""
    rows = []
    for document in data["documents"]:
        for period in document["periods"]:
            for variant in period["variants"]:
                rows.append(
                    [
                        document["family"],
                        document["doc_id"],
                        document["version"],
                        period["from"] or "(before)",
                        period["to"] or "now",
                        _either(variant, "version_state", str),
                        _either(variant, "effective_from", _day),
                        _either(variant, "effective_to", _day),
                        _either(variant, "quarantined", lambda q: "yes" if q else "no"),
                        variant["points"],
                        _by(period["by"]),
                    ]
                )
    out = [
        table(
            [
                "family",
                "doc",
                "version",
                "held from",
                "until",
                "state",
                "effective from",
                "to",
                "quarantined",
                "chunks",
                "changed by",
            ],
            rows,
        ),
        "",
        "served by default_filter (log time):",
    ]
    for document in data["documents"]:
        for stretch in document["served"]:
            maybe = f", {stretch['undetermined']} undetermined" if stretch["undetermined"] else ""
            out.append(
                f"  {document['doc_id']}: {stretch['from']} -> {stretch['to']} "
                f"({stretch['points']} chunk(s){maybe})"
            )
    out += ["", "this answer rests on:"]
    out += [f"  - {line}" for line in data["basis"]]
    return "\n".join(out)


# -- the picture -----------------------------------------------------------------------------


def _instant(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return parse_instant(value)
    except (ValueError, OverflowError):
        return None


def _open(value: datetime | None) -> bool:
    return value is None or value.year >= 9999 or value.year <= 1


class _Axis:
    """Instants to x positions, over the instants a picture shows."""

    def __init__(self, instants: Sequence[datetime]) -> None:
        low, high = min(instants), max(instants)
        pad = max((high - low) * 0.04, timedelta(hours=1))
        self.low, self.high = low - pad, high + pad
        self.x0, self.x1 = LEFT, WIDTH - RIGHT

    def x(self, instant: datetime) -> float:
        instant = min(max(instant, self.low), self.high)
        share = (instant - self.low) / (self.high - self.low)
        return round(self.x0 + share * (self.x1 - self.x0), 1)

    def ticks(self) -> list[tuple[datetime, str]]:
        """About eight instants on round dates, with their labels."""
        span = self.high - self.low
        found: list[tuple[datetime, str]] = []
        if span > timedelta(days=3 * 365):
            step = max(1, round(span.days / 365 / 8))
            year = self.low.year + 1
            while year <= self.high.year:
                found.append((datetime(year, 1, 1, tzinfo=UTC), str(year)))
                year += step
        elif span > timedelta(days=60):
            months = max(1, round(span.days / 30 / 8))
            year, month = self.low.year, self.low.month + 1
            while True:
                year, month = year + (month - 1) // 12, (month - 1) % 12 + 1
                at = datetime(year, month, 1, tzinfo=UTC)
                if at > self.high:
                    break
                found.append((at, at.strftime("%Y-%m")))
                month += months
        else:
            step_hours = max(1, round(span.total_seconds() / 3600 / 8))
            at = self.low.replace(minute=0, second=0, microsecond=0) + timedelta(hours=1)
            if step_hours >= 24:
                at = at.replace(hour=0) + timedelta(days=1)
            while at <= self.high:
                label = at.strftime("%Y-%m-%d") if step_hours >= 24 else at.strftime("%m-%d %H:%M")
                found.append((at, label))
                at += timedelta(hours=step_hours)
        return [(at, label) for at, label in found if self.low <= at <= self.high]


def _axis_instants(data: Mapping[str, Any]) -> list[datetime]:
    found = [parse_instant(data["until"])]
    for document in data["documents"]:
        for period in document["periods"]:
            for key in ("from", "to"):
                at = _instant(period[key])
                if at is not None:
                    found.append(at)
            for variant in period["variants"]:
                for payload in variant["payloads"]:
                    for key in ("effective_from", "effective_to"):
                        at = _instant((payload or {}).get(key))
                        if at is not None and not _open(at):
                            found.append(at)
    return found


def history_svg(data: dict[str, Any]) -> str:
    """The picture of ``audit history``'s answer (see the module docstring)."""
    axis = _Axis(_axis_instants(data))
    body: list[str] = []
    backgrounds: list[str] = []
    y = 110
    families: dict[Any, list[dict[str, Any]]] = {}
    for document in data["documents"]:
        families.setdefault(document["family"], []).append(document)
    for family, documents in families.items():
        body.append(_text(16, y, f"family {family}", size=14, weight="bold"))
        y += 12
        top = y
        for document in documents:
            y = _lane(body, axis, document, y)
        body.insert(
            0,
            f"<rect x='{LEFT}' y='{top}' width='{WIDTH - LEFT - RIGHT}' "
            f"height='{y - top}' fill='#f8f9fa'/>",
        )
        y += 22
    until = axis.x(parse_instant(data["until"]))
    grid = [
        f"<line x1='{until}' y1='90' x2='{until}' y2='{y - 16}' stroke='{SERVED}' "
        "stroke-dasharray='2,3'/>",
        _text(until, y - 4, "now", size=10, anchor="middle"),
    ]
    for at, label in axis.ticks():
        x = axis.x(at)
        grid.append(f"<line x1='{x}' y1='90' x2='{x}' y2='{y - 16}' stroke='#dee2e6'/>")
        grid.append(_text(x, 86, label, size=10, anchor="middle"))
    head = [
        _text(16, 22, _title(data), size=15, weight="bold"),
        *_legend(34),
    ]
    height = y + 10
    return "\n".join(
        [
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{WIDTH}' height='{height}' "
            f"viewBox='0 0 {WIDTH} {height}' {FONT}>",
            "<defs><pattern id='doubt' width='6' height='6' patternUnits='userSpaceOnUse' "
            "patternTransform='rotate(45)'><rect width='3' height='6' "
            f"fill='{UNDETERMINED}'/></pattern></defs>",
            f"<rect width='{WIDTH}' height='{height}' fill='white'/>",
            *head,
            *backgrounds,
            *grid,
            *body,
            "</svg>",
            "",
        ]
    )


def _title(data: Mapping[str, Any]) -> str:
    scope = [*data["scope"]["families"], *data["scope"]["docs"]]
    log = data["log"]
    return (
        f"{', '.join(scope)}: versions over time, from the audit log "
        f"({log['entries']} entries verified, until {data['until'][:16].replace('T', ' ')})"
    )


def _legend(y: int) -> list[str]:
    out = []
    x = 16
    for state, colour in STATE_COLOURS.items():
        out.append(f"<rect x='{x}' y='{y - 9}' width='14' height='10' fill='{colour}'/>")
        out.append(_text(x + 18, y, state, size=11))
        x += 26 + int(len(state) * CHAR)
    out.append(f"<rect x='{x}' y='{y - 9}' width='14' height='10' fill='url(#doubt)'/>")
    out.append(_text(x + 18, y, "in doubt or unknown", size=11))
    x += 26 + int(19 * CHAR)
    out.append(
        f"<rect x='{x}' y='{y - 9}' width='14' height='10' fill='white' "
        f"stroke='{QUARANTINED}' stroke-width='2'/>"
    )
    out.append(_text(x + 18, y, "quarantined", size=11))
    y += 17
    out.append(f"<path d='M 16 {y - 9} l 5 8 l 5 -8 z' fill='{SERVED}'/>")
    out.append(
        _text(
            32,
            y,
            "when the log recorded it; the bar is the effective window its chunks held from "
            "then on (a row a change)",
            size=11,
        )
    )
    y += 16
    out.append(f"<rect x='16' y='{y - 7}' width='14' height='5' fill='{SERVED}'/>")
    out.append(_text(34, y, "served: when default_filter admitted it", size=11))
    return out


#: A period in doubt shorter than this (a write between its intent and its confirmation)
#: gets no bar of its own: the served band still shows it.
BRIEF = timedelta(minutes=1)


def drawn(period: Mapping[str, Any]) -> bool:
    """Whether a period gets bars: not one that only a brief write kept in doubt."""
    if any(v["status"] in ("known", "unknown") for v in period["variants"]):
        return True
    start, end = _instant(period["from"]), _instant(period["to"])
    return start is None or end is None or end - start >= BRIEF


def _lane(body: list[str], axis: _Axis, document: Mapping[str, Any], y: int) -> int:
    """One version: its name, a row a period, then its served band; returns the next lane's
    top."""
    label = f"v{document['version']}  {document['doc_id']}"
    body.append(_text(16, y + 11, _clip(label, LEFT - 24), size=12, weight="bold"))
    y += 16
    for period in document["periods"]:
        if not drawn(period):
            continue
        for variant in period["variants"]:
            y = _bar(body, axis, period, variant, y)
    for stretch in document["served"]:
        x0 = axis.x(parse_instant(stretch["from"]))
        x1 = axis.x(parse_instant(stretch["to"]))
        fill = SERVED if not stretch["undetermined"] else "url(#doubt)"
        body.append(
            f"<rect x='{x0}' y='{y}' width='{max(x1 - x0, 1.5)}' height='5' fill='{fill}'>"
            f"<title>served {stretch['from']} to {stretch['to']}: {stretch['points']} "
            f"chunk(s), {stretch['undetermined']} undetermined</title></rect>"
        )
    body.append(_text(28, y + 6, "served", size=10))
    return y + 5 + GAP * 3


def _bar(
    body: list[str], axis: _Axis, period: Mapping[str, Any], variant: Mapping[str, Any], y: int
) -> int:
    """One row: from when (left column), the window's bar coloured by state, its dates."""
    if variant["status"] == "absent":
        return y  # no point in this period: nothing to draw
    payloads = [p for p in variant["payloads"] if p]
    shown = payloads[0] if payloads else {}
    doubt = variant["status"] in ("in_doubt", "unknown")
    start = _instant(shown.get("effective_from"))
    end = _instant(shown.get("effective_to"))
    x0 = axis.x0 if start is None or _open(start) else axis.x(start)
    x1 = axis.x1 if end is None or _open(end) else axis.x(end)
    state = str(shown.get("version_state")) if shown else variant["status"]
    fill = "url(#doubt)" if doubt else STATE_COLOURS.get(state, "#ced4da")
    stroke = f" stroke='{QUARANTINED}' stroke-width='2'" if shown.get("quarantined") else ""
    held = (period["from"] or "before the log")[:16].replace("T", " ")
    said = variant["status"].replace("_", " ") if doubt else state
    left = f"{held}  {said}" + (f" ({variant['points']})" if variant["points"] > 1 else "")
    body.append(_text(28, y + BAR - 3, _clip(left, LEFT - 36), size=11))
    window = f"{_day(shown.get('effective_from'))} → {_day(shown.get('effective_to'))}"
    if len(payloads) > 1:
        other = payloads[1]
        window += (
            f"  or  {other.get('version_state')} {_day(other.get('effective_from'))} → "
            f"{_day(other.get('effective_to'))}"
        )
    tip = f"{said} {window}; held from {held}; {_by(period['by'])}"
    if shown:
        body.append(
            f"<rect x='{x0}' y='{y}' width='{max(x1 - x0, 2)}' height='{BAR}' fill='{fill}' "
            f"rx='2'{stroke}><title>{escape(tip)}</title></rect>"
        )
        if start is None or _open(start):
            body.append(_text(x0 + 3, y + BAR - 3, "◀", size=9, colour="white"))
        if end is None or _open(end):
            body.append(_text(x1 - 12, y + BAR - 3, "▶", size=9, colour="white"))
        width = len(window) * CHAR
        if x1 + 6 + width <= WIDTH - 4:
            body.append(_text(x1 + 6, y + BAR - 3, window, size=11))
        elif x0 - 6 - width >= LEFT:
            body.append(_text(x0 - 6, y + BAR - 3, window, size=11, anchor="end"))
        else:
            body.append(_text(max(x0, LEFT) + 18, y + BAR - 3, window, size=11))
    recorded = _instant(period["from"])
    if recorded is not None:
        xr = axis.x(recorded)
        body.append(f"<path d='M {xr - 5} {y - 2} l 5 8 l 5 -8 z' fill='{SERVED}'/>")
    return y + BAR + GAP


def _clip(text: str, width: float) -> str:
    most = int(width / 7)
    return text if len(text) <= most else text[: most - 1] + "…"


def _text(
    x: float,
    y: float,
    words: str,
    *,
    size: int = 11,
    weight: str = "normal",
    anchor: str = "start",
    colour: str = SERVED,
) -> str:
    halo = "white" if colour != "white" else SERVED
    return (
        f"<text x='{x}' y='{y}' font-size='{size}' font-weight='{weight}' "
        f"text-anchor='{anchor}' fill='{colour}' stroke='{halo}' stroke-width='3' "
        f"stroke-opacity='0.85' paint-order='stroke'>{escape(words)}</text>"
    )
