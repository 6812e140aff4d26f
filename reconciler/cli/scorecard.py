"""The ``eval`` scorecard for people (``--format table``): one row per slice, then the
failing cases. The scores themselves are ``reconciler.app.evaluating``'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.cli.rendering import table


def render_eval(data: Mapping[str, Any]) -> str:
    """The scorecard for people: one row per slice, then the failing cases."""
    k = data["k"]
    rows = [
        [
            s["slice"],
            s["cases"],
            s["pass"],
            s["fail"],
            "uncovered" if s["latest_at_k"] is None else f"{s['latest_at_k']:.3f}",
            s["stale_cited"] if s["cases"] else "uncovered",
            "" if s["baseline"] is None else f"{s['baseline']:.3f}",
            s["status"],
        ]
        for s in data["slices"]
    ]
    out = [
        f"eval {data['golden']} on {data['collection']} (k={k}, through default_filter())",
        "",
        table(
            ["slice", "cases", "pass", "fail", f"Latest@{k}", "stale-cited", "baseline", "status"],
            rows,
        ),
    ]
    failed = [c for c in data["cases"] if not c["pass"]]
    if failed:
        out.append("\nfailing cases:")
        for case in failed:
            why = []
            if not case["found"]:
                why.append(f"{case['expect']} not in the top {k}")
            if case["stale_cited"]:
                why.append("cites " + ", ".join(case["stale_cited"]))
            out.append(f"  [{case['slice']}] {case['id']}: {case['query']}")
            out.append(f"      {'; '.join(why)}  (top: {', '.join(case['top']) or 'nothing'})")
    if data["hard_zero_failed"]:
        out.append(
            "\nFAILED: stale-cited is a hard zero; slices citing a replaced document: "
            + ", ".join(data["hard_zero_failed"])
            + " (run `reconciler check` to see why the payloads admit them)"
        )
    if data["regressions"]:
        out.append("\nREGRESSED against the baseline: " + ", ".join(data["regressions"]))
    if data["ok"]:
        out.append("\nok: no stale document cited" + (", no regression" if rows else ""))
    return "\n".join(out)
