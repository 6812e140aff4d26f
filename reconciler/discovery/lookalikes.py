"""Ids that look like other ids: a document id typed or pasted into a reviewed file with a
Cyrillic ``o`` (U+043E) for a Latin ``o``, a zero-width space, a non-breaking hyphen. Printed as they
are, such an id and the real one are indistinguishable; so an id is shown with its unusual
characters escaped and named, and its *skeleton* (the id with look-alikes mapped to the
character they imitate and invisible characters dropped) names the real id it imitates.

The map is a small, deliberate one (the Latin look-alikes of the Cyrillic, Greek and
typographic characters met in practice, after NFKC, which already folds full-width and
compatibility forms); it serves to find a likely real id, never to decide identity.
"""

from __future__ import annotations

import unicodedata

__all__ = ["shown", "skeleton", "unusual"]

#: Each look-alike (escaped: printed, they would be the point) and what it imitates.
_LOOKS: list[tuple[str, str]] = [
    ("\u0430\u0432\u0435\u043a\u043c\u043d\u043e\u0440\u0441\u0442", "abekmhopct"),  # Cyrillic
    ("\u0443\u0445\u0455\u0456\u0458\u0501\u04cf\u051b\u051d\u04bb", "yxsijdlqwh"),
    ("\u0410\u0412\u0415\u041a\u041c\u041d\u041e\u0420\u0421\u0422", "ABEKMHOPCT"),
    ("\u0423\u0425\u0405\u0406\u0408", "YXSIJ"),
    ("\u03b1\u03bf\u03c1\u03bd\u03b9\u03ba\u03c4\u03c5\u0391\u0392", "aopviktuAB"),  # Greek
    ("\u0395\u0396\u0397\u0399\u039a\u039c\u039d\u039f\u03a1\u03a4", "EZHIKMNOPT"),
    ("\u03a5\u03a7", "YX"),
    (
        "\u0131\u0261\u2113\u2010\u2011\u2012\u2013\u2014\u2212\u00a0",
        "igl------ ",
    ),  # Latin look-alikes and typography
    ("\u2018\u2019\u02bc", "'''"),
]
_LOOKALIKE = str.maketrans("".join(a for a, _ in _LOOKS), "".join(b for _, b in _LOOKS))


def _invisible(char: str) -> bool:
    """A character that prints as nothing (a format character, a zero-width space)."""
    return unicodedata.category(char) in ("Cf", "Cc", "Zl", "Zp") or char in "\u200b\u3164\u115f"


def skeleton(text: str) -> str:
    """``text`` with invisible characters dropped and look-alikes mapped to what they imitate."""
    folded = unicodedata.normalize("NFKC", text)
    return "".join(c for c in folded if not _invisible(c)).translate(_LOOKALIKE)


def unusual(text: str) -> list[str]:
    """Each character of ``text`` outside printable ASCII, named with its position."""
    return [
        f"U+{ord(c):04X} {unicodedata.name(c, 'UNNAMED')} at position {n}"
        + (" (invisible)" if _invisible(c) else "")
        for n, c in enumerate(text)
        if not (" " <= c <= "~")
    ]


def shown(text: str) -> str:
    """``text`` quoted so that two different ids never print alike (non-ASCII escaped)."""
    return ascii(text)
