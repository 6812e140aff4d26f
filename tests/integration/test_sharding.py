"""--shard i/N: N partitions of the families by a stable hash cover every family exactly once."""

from __future__ import annotations

from pathlib import Path

import pytest
from acceptance_kit import Deployment

from reconciler.rules.sharding import Shard, stable_shard


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_every_family_belongs_to_exactly_one_shard(count: int) -> None:
    families = [f"src:family-{n}" for n in range(2000)]
    owners = {f: [i for i in range(count) if Shard(i, count).owns(f)] for f in families}
    assert all(len(o) == 1 for o in owners.values())
    sizes = [sum(1 for o in owners.values() if o == [i]) for i in range(count)]
    assert min(sizes) > 2000 / count * 0.8  # roughly even
    assert stable_shard("src:family-1", 7) == stable_shard("src:family-1", 7)  # stable


@pytest.mark.parametrize("text", ["3/3", "a/2", "1", "-1/2", "0/0"])
def test_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="shard"):
        Shard.parse(text)


def test_shard_runs_together_cover_the_corpus_once(tmp_path: Path) -> None:
    dep = Deployment(tmp_path)
    names = [f"policy{n}" for n in range(12)]
    for name in names:
        dep.family(name, versions=2, sections=1)
    dep.init_ingest()
    for name in names:  # drift in every family: the old version un-superseded in the rows
        dep.set_row(f"hb:{name}-v1", version_state="current", superseded_by=None)
    seen: list[set[str]] = []
    checked = 0
    for i in range(3):
        code, data = dep.json("check", "--shard", f"{i}/3")
        assert code in (0, 2)
        seen.append({f["family"] for f in data["findings"] if f["family"]})
        checked += data["summary"]["family"]["checked"]
    assert checked == 12
    assert set.union(*seen) == {f"hb:{name}" for name in names}
    assert sum(len(s) for s in seen) == 12  # disjoint
