"""The CLI over the whole corpus's lease and a shard's (docs/engine.md, "The whole corpus's
lease and a shard's"): ``ingest`` and ``rekey`` refused while a shard's run holds its lease
(``lease_busy``, exit 1, naming it and its holder), a shard's ``run`` skipped while the whole
corpus's is held (exit 0), and both going on once the other has let go."""

from __future__ import annotations

import os

import pytest
from acceptance_kit import Deployment

from reconciler.app.holding import lease_name
from reconciler.app.wiring import leases_of, open_table


@pytest.mark.parametrize("deploy", ["sqlite", "postgresql"], indirect=True)
def test_an_ingestion_and_a_shards_run_refuse_each_other(deploy: Deployment) -> None:
    deploy.family("alpha", 2)
    deploy.init_ingest()
    table = open_table(deploy.settings)
    try:
        shard = leases_of(table)(lease_name("1/4"))
        assert shard.acquire()  # a shard's run is writing
        for command in (("ingest",), ("rekey",)):
            code, refused = deploy.json(*command)
            assert code == 1, refused
            assert refused["error"] == "lease_busy", refused
            assert f"lease {lease_name('1/4')} by " in refused["message"], refused
            assert f":{os.getpid()}" in refused["message"], refused
        assert deploy.cli("run", "--shard", "3/4").exit_code == 0  # shards run together
        shard.release()

        whole = leases_of(table)(lease_name("0/1"))
        assert whole.acquire()  # an ingestion is writing
        skipped = deploy.cli("run", "--shard", "1/4")
        assert skipped.exit_code == 0, skipped.output  # a cron run that loses skips
        assert "skipped: another runner holds the lease of shard 1/4" in skipped.output
        assert f"lease {lease_name('0/1')} by " in skipped.output, skipped.output
        whole.release()
    finally:
        table.close()
    code, ingested = deploy.json("ingest")
    assert code == 0, ingested
    assert deploy.cli("run", "--shard", "1/4").exit_code == 0
