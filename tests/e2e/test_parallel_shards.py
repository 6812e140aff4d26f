"""N shard processes applying at once against one document table (PostgreSQL, SQLite): each
holds its own shard's lease, all append to one audit chain, and ``audit verify`` passes.

Each process has its own copy of the Qdrant local-mode folder (local mode admits one process);
the table, its leases and its audit chain are shared, which is what this test is about.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import time

import pytest
from acceptance_kit import Deployment

SHARDS = 3


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_parallel_shards_extend_one_audit_chain(deploy: Deployment) -> None:
    if deploy.table_url.startswith("sqlite"):  # one file for every process, wherever it runs
        deploy.table_url = f"sqlite:///{deploy.root / 'reconciler.db'}"
        deploy.configure()
    for n in range(45):
        deploy.family(f"f{n:02d}", 2, sections=3)
    deploy.init_ingest()
    assert deploy.json("apply")[0] == 0
    for n in range(45):
        deploy.edit_front(f"f{n:02d}-v2", status="retired")
        deploy.edit_front(f"f{n:02d}-v1", doc_class="archive")

    configs = []
    for i in range(SHARDS):
        shutil.copytree(deploy.root / "qdrant", deploy.root / f"qdrant-{i}")
        config = deploy.root / f"shard-{i}.toml"
        config.write_text(
            deploy.config.read_text().replace(
                'path = "qdrant"', f'path = "qdrant-{i}"\nwrite_batch = 3'
            )
        )
        configs.append(config)
    # Each process loads what an apply needs, says it is ready, and starts only once all are:
    # on a loaded machine, a process still importing would otherwise start after another had
    # finished, and nothing would run at once.
    gate = deploy.root / "go"
    code = (
        "import pathlib, sys, time\n"
        "import reconciler.app.operations, reconciler.pipeline.running, reconciler.writing.applying\n"
        "import reconciler.stores.sql, reconciler.stores.qdrant.index\n"
        "from reconciler.cli import main\n"
        "pathlib.Path(sys.argv[1]).touch()\n"
        f"while not pathlib.Path({str(gate)!r}).exists(): time.sleep(0.01)\n"
        "del sys.argv[1]\n"
        "main()\n"
    )
    ready = [deploy.root / f"ready-{i}" for i in range(SHARDS)]
    processes = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                code,
                str(ready[i]),
                "--config",
                str(config),
                "apply",
                "--shard",
                f"{i}/3",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env={**os.environ, "RECONCILER_CONFIG": ""},
        )
        for i, config in enumerate(configs)
    ]
    deadline = time.monotonic() + 120
    while not all(path.exists() for path in ready) and time.monotonic() < deadline:
        time.sleep(0.01)
    gate.touch()
    outputs = [p.communicate(timeout=300)[0].decode() for p in processes]
    assert [p.returncode for p in processes] == [0] * SHARDS, outputs

    runs = [r for r in deploy.dump()["runs"].values() if r["mode"] == "apply"]
    sharded = [r for r in runs if r["shard"] != "0/1"]
    assert sorted(r["shard"] for r in sharded) == [f"{i}/3" for i in range(SHARDS)]
    assert all(r["status"] == "succeeded" and r["rows_written"] > 0 for r in sharded)
    # They did append at once: their entries interleave in the chain (one after the other,
    # the chain would switch runs only twice).
    ids = {r["run_id"] for r in sharded}
    log = sorted(deploy.dump()["audit_log"].items())  # by seq
    order = [entry["run_id"] for _seq, entry in log if entry["run_id"] in ids]
    switches = sum(1 for a, b in itertools.pairwise(order) if a != b)
    assert switches > SHARDS - 1, switches
    code, verified = deploy.json("audit", "verify")
    assert (code, verified["problems"]) == (0, [])
