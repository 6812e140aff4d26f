"""``--now`` evaluates as of another instant; it never moves a source's last successful read
(issue 24, item 8). A ``run --now 2099`` once recorded 2099 as the vault's last read, so a
vault gone for days was never quarantined; a ``run --now 1990`` made the next TTL job
quarantine a vault read minutes before."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from acceptance_kit import Deployment, instant, kinds


def last_read(deploy: Deployment) -> datetime:
    [row] = deploy.dump()["source_status"].values()
    stamp: datetime = row["last_success_at"]
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)


@pytest.mark.parametrize("as_of", ["2099-01-01T00:00:00Z", "1990-01-01T00:00:00Z"])
def test_a_run_as_of_another_instant_records_the_read_at_the_clock(
    deploy: Deployment, as_of: str
) -> None:
    deploy.family("expenses", 2)
    deploy.init_ingest()
    result = deploy.cli("run", "--now", as_of)
    assert result.exit_code in {0, 2}, result.output
    assert abs(last_read(deploy) - datetime.now(UTC)) < timedelta(minutes=5)
    assert "day(s) from the clock" in result.stderr  # the run says it evaluates elsewhen

    # Read just now: a TTL job at the clock's now quarantines nothing...
    _, data = deploy.json("check", "--check", "ttl")
    assert ("ttl", "ttl_expired", "hb:expenses-v1") not in kinds(data)
    # ...and the vault gone for two days is past its TTL (24h), whatever --now said before.
    deploy.vault.rename(deploy.root / "vault.away")
    _, data = deploy.json("check", "--check", "ttl", "--now", instant(2))
    assert ("ttl", "ttl_expired", "hb:expenses-v1") in kinds(data)
