"""scratch"""

from __future__ import annotations

import time

from acceptance_kit import Deployment
from test_watch import deployment, served, serving, watch_runs  # noqa: F401


def test_search_under_serve(deployment: Deployment) -> None:
    dep = deployment
    with serving(dep) as wait_log:
        wait_log("watch: following")
        time.sleep(1)
        code, data = dep.json("search", "leave", "-k", "10")
        print("before", code, data if code else [h["doc_id"] for h in data["hits"]])
        dep.edit_front("runbook", status="retired")
        wait_log("reconciled family")
        for _ in range(5):
            code, data = dep.json("search", "runbook", "-k", "10")
            print("after", code, data if code else [h["doc_id"] for h in data["hits"]])
            time.sleep(0.5)
