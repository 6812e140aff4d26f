"""Adversarial review 2 of the watch's thread-per-source, its scope beside the changed source
and the guard's served fraction: each defect a failing reproduction."""

from __future__ import annotations

import sys
import threading
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from acceptance_kit import Deployment, body, day
from prometheus_client import CollectorRegistry
from pytest_httpserver import HTTPServer
from registry_kit import FakeRegistry

from reconciler.app.followers import MAX_DELAY, VaultWatch
from reconciler.app.polling import PolledWatch
from reconciler.app.watching import Watch
from reconciler.clock import ManualClock


def _until_seen(watched: VaultWatch, path: str) -> None:
    deadline = time.monotonic() + 10
    while path not in watched.batch.paths and time.monotonic() < deadline:
        time.sleep(0.02)
    assert path in watched.batch.paths, watched.batch.paths


def _registry_beside_vault(
    tmp_path: Path, httpserver: HTTPServer
) -> tuple[Deployment, FakeRegistry]:
    """A vault hb (runbook, current) and a polled HTTP registry reg whose LOOSE-1 names no
    family and is declared (``reconciler declare --family``) a version of hb:runbook."""
    registry = FakeRegistry(etags=True)
    registry.add("RUN-1", body("Run", "Page."), status="current", family="run")
    registry.add("LOOSE-1", body("Loose", "Old runbook."), status="current")
    dep = Deployment(tmp_path / "dep")
    dep.note("runbook", id="runbook", family="runbook", status="current", effective_from=day(-5))
    url = registry.serve(httpserver)
    dep.configure(
        source_extra="\n".join(
            [
                "[[sources]]",
                'name = "reg"',
                'type = "http"',
                f'url = "{url}"',
                'poll_interval = "1m"',
                "[sources.options]",
                "retries = 0",
                "backoff_factor = 0",
            ]
        )
    )
    dep.init_ingest()
    result = dep.cli("declare", "--family", "hb:runbook", "reg:LOOSE-1", "--reason", "r")
    assert result.exit_code == 0, result.output
    rows = dep.rows()
    assert rows["reg:LOOSE-1"]["doc_family_id"] == "hb:runbook", rows["reg:LOOSE-1"]
    return dep, registry


def test_a_polled_sources_restart_drift_and_a_vault_run_beside_it_do_not_deadlock(
    tmp_path: Path, httpserver: HTTPServer
) -> None:
    """Lock order: a vault's run holds ``_kept`` and then takes the reading lock of every
    source it reads (reg: it holds a member of the run's family). reg's first poll after a
    restart holds reg's reading lock and, its token having moved while serve was down, asks
    ``_drift`` which takes ``_kept``. Two threads (``start``'s one a source), two locks taken
    in opposite orders: both threads hang for ever, every source's watch with them."""
    dep, registry = _registry_beside_vault(tmp_path, httpserver)
    first = Watch(dep.settings, CollectorRegistry(), clock=ManualClock(datetime.now(UTC)))
    first.open()
    first.tick()  # (reg's first mark)
    first.stop()
    registry.update("RUN-1", status="retired")  # (changed while serve was down)

    clock = ManualClock(datetime.now(UTC))
    watch = Watch(dep.settings, CollectorRegistry(), clock=clock)
    watch.open()
    hb = next(w for w in watch.sources if isinstance(w, VaultWatch))
    reg = next(w for w in watch.sources if isinstance(w, PolledWatch))
    try:
        dep.edit_front("runbook", status="retired")
        _until_seen(hb, "runbook.md")
        clock.advance(MAX_DELAY)
        source: Any = reg.source
        scan = source.scan

        def slow_scan(*args: Any, **kwargs: Any) -> Any:  # (a registry slow to list)
            time.sleep(1.0)
            return scan(*args, **kwargs)

        source.scan = slow_scan
        polling = threading.Thread(target=watch.tick, args=([reg],), daemon=True)
        polling.start()
        time.sleep(0.3)  # (reg's poll holds its reading lock, in its scan)
        running = threading.Thread(target=watch.tick, args=([hb],), daemon=True)
        running.start()
        polling.join(20)
        running.join(20)
        stuck = {
            t.name: "".join(traceback.format_stack(sys._current_frames()[t.ident])[-3:])
            for t in (polling, running)
            if t.is_alive() and t.ident is not None
        }
        assert not stuck, f"deadlock: _kept vs reg's reading lock: {stuck}"
    finally:
        watch.stopping.set()


def test_an_archive_of_retired_notes_does_not_dilute_a_mass_hide_by_the_watch(
    tmp_path: Path,
) -> None:
    """15 served notes beside 85 retired ones (an archive kept in the vault); a bad bulk edit
    retires the 15 at once. The full job weighs it against what is served (15 of 15: refused,
    ``guarding._served_counted``); the watch's run is weighed against the corpus
    (``Engine.corpus_totals``: every family, the 85 retired ones too), 15 of 100 = 0.15,
    within 0.2: every served note is hidden without --force."""
    dep = Deployment(tmp_path)
    dep.configure(fraction=0.2)
    served = [f"s{i:02d}" for i in range(15)]
    for name in served:
        dep.note(name, id=name, family=name, status="current", effective_from=day(-50))
    for i in range(85):
        dep.note(f"a{i:02d}", id=f"a{i:02d}", family=f"a{i:02d}", status="retired",
                 effective_from=day(-400))  # fmt: skip
    dep.init_ingest()
    assert len(dep.served()) == 15
    clock = ManualClock(datetime.now(UTC))
    watch = Watch(dep.settings, CollectorRegistry(), clock=clock)
    watch.open()
    hb = next(w for w in watch.sources if isinstance(w, VaultWatch))
    try:
        watch.tick()
        for name in served:
            dep.edit_front(name, status="retired")
        for name in served:
            _until_seen(hb, f"{name}.md")
        clock.advance(MAX_DELAY)
        watch.tick()
    finally:
        watch.stop()
    assert len(dep.served()) == 15, f"the watch hid {15 - len(dep.served())} of 15 served notes"


def test_a_batch_waiting_for_its_turn_is_not_run_after_serves_stop(tmp_path: Path) -> None:
    """Two vaults, a thread each. hb's run is under way (it holds ``_kept``); hb2's batch is
    due and its thread waits for ``_kept``. serve stops (SIGTERM) meanwhile: hb2's thread
    checked ``stopping`` before it waited, not after, so once hb's run ends it starts a run of
    its own, after the stop was asked (and ``stop`` then waits for it: the stop is as long as
    every queued run, one a source)."""
    dep = Deployment(tmp_path)
    (tmp_path / "vault2").mkdir()
    (tmp_path / "vault2" / "b.md").write_text(
        f"---\nid: b\nfamily: b\nstatus: current\neffective_from: {day(-5)}\n---\n"
        + body("b", "B.")
        + "\n",
        encoding="utf-8",
    )
    dep.configure(source_extra='[[sources]]\nname = "hb2"\ntype = "vault"\npath = "vault2"')
    dep.note("a", id="a", family="a", status="current", effective_from=day(-5))
    dep.init_ingest()
    started = threading.Event()
    go_on = threading.Event()
    calls: list[str] = []

    def run(families: frozenset[str], source: str, paths: Any) -> Any:
        calls.append(source)
        if len(calls) == 1:
            started.set()
            go_on.wait(20)
        raise RuntimeError("(not run here)")

    clock = ManualClock(datetime.now(UTC))
    watch = Watch(dep.settings, CollectorRegistry(), clock=clock, run=run)
    watch.open()
    hb, hb2 = (next(w for w in watch.sources if w.name == n) for n in ("hb", "hb2"))
    assert isinstance(hb, VaultWatch)
    assert isinstance(hb2, VaultWatch)
    try:
        dep.edit_front("a", status="retired")
        text = (tmp_path / "vault2" / "b.md").read_text(encoding="utf-8")
        (tmp_path / "vault2" / "b.md").write_text(text.replace("current", "retired"))
        _until_seen(hb, "a.md")
        _until_seen(hb2, "b.md")
        clock.advance(MAX_DELAY)
        first = threading.Thread(target=watch.tick, args=([hb],), daemon=True)
        first.start()
        assert started.wait(10)
        second = threading.Thread(target=watch.tick, args=([hb2],), daemon=True)
        second.start()
        time.sleep(0.5)  # (hb2's batch is due: its thread waits for _kept)
        stopper = threading.Thread(target=watch.stop, daemon=True)
        stopper.start()
        time.sleep(0.5)  # (serve is stopping)
        go_on.set()
        stopper.join(30)
        second.join(10)
    finally:
        go_on.set()
        watch.stop()
    assert calls == ["hb"], f"runs started after serve's stop: {calls[1:]}"


def test_a_scoped_repair_widened_beside_an_archive_is_weighed_against_what_is_served(
    tmp_path: Path,
) -> None:
    """15 served notes beside 85 retired ones; a family typo puts the 15 into one family, and
    ``repair --family hb:s00`` widens to all 15 and hides 14: weighed against the corpus's
    100 families (14% <= 20%) it was written; against the 15 served, refused."""
    dep = Deployment(tmp_path)
    dep.configure(fraction=0.2)
    for n in range(15):
        dep.note(f"s{n:02d}", body(f"note {n}", f"rule {n}"), id=f"s{n:02d}",
                 status="current", effective_from=day(-300 + n))  # fmt: skip
    for n in range(85):
        dep.note(f"a{n:02d}", body(f"old {n}", f"old rule {n}"), id=f"a{n:02d}",
                 status="retired", effective_from=day(-900 + n))  # fmt: skip
    dep.init_ingest()
    served = dep.served()
    assert len(served) == 15
    for n in range(15):
        dep.edit_front(f"s{n:02d}", family="policies")
    code, data = dep.json("repair", "--family", "hb:s00")
    assert (code, data["refused"]) == (3, True), data["guard"]
    assert dep.served() == served
