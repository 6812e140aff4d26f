"""``POST /hooks/SOURCE`` on a real ``reconciler serve``: a git source polled once an hour is
reconciled at once when a signed hook says so; an unsigned or wrongly signed request is 401
and changes nothing; a source not watched is 404; everything else is GET only."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from acceptance_kit import Deployment, day
from exposition_kit import free_port
from git_kit import Repo
from prometheus_client.parser import text_string_to_metric_families

from reconciler.app.hooks import signature

SECRET = "hook-secret-for-the-test"
FRONT = "---\nid: {0}\nfamily: {0}\nstatus: {1}\neffective_from: {2}\n---\n# {0}\n\nBody.\n"


def _post(url: str, body: bytes, sign: str | None, method: str = "POST") -> int:
    request = urllib.request.Request(url, data=body, method=method)
    if sign is not None:
        request.add_header("X-Hub-Signature-256", sign)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def test_a_signed_hook_reconciles_now_and_nothing_else_gets_in(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "repo")
    for name in ("alpha", "beta"):
        repo.write(f"{name}.md", FRONT.format(name, "current", day(-30)))
    repo.commit("start")
    dep = Deployment(tmp_path / "dep")
    port = free_port()
    dep.config.write_text(
        dep.config.read_text().replace(
            'name = "hb"\ntype = "vault"\npath = "vault"',
            f'name = "gh"\ntype = "git"\npath = "{repo.root}"\npoll_interval = "1h"',
        )
        + f'[metrics]\nlisten = "127.0.0.1:{port}"\n[schedule]\nfull = "0 2 1 1 *"\n'
        'ttl = "0 3 1 1 *"\ndates = "0 4 1 1 *"\n'
        '[watch]\nwebhooks = true\nwebhook_secret_env = "TEST_HOOK_SECRET"\n'
    )
    dep.init_ingest()
    log = dep.root / "serve.log"
    env = {**__import__("os").environ, "TEST_HOOK_SECRET": SECRET}
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler.cli", "--config", str(dep.config),
             "--log-level", "info", "serve"],
            stdout=out, stderr=subprocess.STDOUT, env=env,
        )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        _until(lambda: "watch: following" in log.read_text(), proc, log)
        _until(lambda: "starting at commit" in log.read_text(), proc, log)  # (its first poll)
        repo.write("beta.md", FRONT.format("beta", "retired", day(-30)))
        repo.commit("retire beta")
        body = b'{"ref": "refs/heads/main"}'
        assert _post(f"{base}/hooks/gh", body, None) == 401
        assert _post(f"{base}/hooks/gh", body, "sha256=" + "0" * 64) == 401
        assert _post(f"{base}/hooks/gh", body, signature(b"another secret", body)) == 401
        assert _post(f"{base}/hooks/gh", body + b" ", signature(SECRET.encode(), body)) == 401
        assert _post(f"{base}/hooks/gh", b"", None, method="GET") == 405
        assert _post(f"{base}/metrics", body, signature(SECRET.encode(), body)) == 405
        assert _post(f"{base}/hooks/nope", body, signature(SECRET.encode(), body)) == 404
        time.sleep(1.0)  # (were any of them taken, the watch would poll within a tick)
        assert "branch moved" not in log.read_text()
        assert dep.served() == {"gh:alpha", "gh:beta"}
        assert _post(f"{base}/hooks/gh", body, signature(SECRET.encode(), body)) == 202
        _until(lambda: "reconciled family" in log.read_text(), proc, log)
        _until(lambda: _served(dep) == {"gh:alpha"}, proc, log)
        counted = _webhook_counts(f"{base}/metrics")
        assert counted == {
            ("gh", "unauthorized"): 4.0,
            ("gh", "method_not_allowed"): 1.0,
            ("other", "unknown_source"): 1.0,
            ("gh", "accepted"): 1.0,
        }, counted
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    text = log.read_text()
    assert SECRET not in text
    assert text.count("refused:") == 4


def _webhook_counts(url: str) -> dict[tuple[str, str], float]:
    """``reconciler_webhook_requests_total`` by (source, outcome), the zero ones left out."""
    with urllib.request.urlopen(url, timeout=10) as answer:
        text = answer.read().decode()
    counts = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "reconciler_webhook_requests_total" and sample.value:
                counts[(sample.labels["source"], sample.labels["outcome"])] = sample.value
    return counts


def _served(dep: Deployment) -> set[str] | None:
    try:
        return dep.served()
    except Exception:  # (the index is locked while a run writes: read again)
        return None


def _until(done, proc: subprocess.Popen[bytes], log: Path, seconds: float = 90) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + seconds
    while not done():
        assert proc.poll() is None, log.read_text()
        assert time.monotonic() < deadline, log.read_text()
        time.sleep(0.1)
