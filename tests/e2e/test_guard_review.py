"""Adversarial review of the served-set guard (issue 37): the fraction it weighs is of what
retrieval serves, so an archive of retired documents beside the served ones must not dilute
a change that hides every served document."""

from __future__ import annotations

from acceptance_kit import Deployment, body, day, writes_zero


def test_a_typo_that_retires_everything_is_refused_beside_an_archive(
    deploy: Deployment,
) -> None:
    """15 served notes beside 85 retired ones (an archive kept in the vault): a status_map
    typo retires all 15. Retrieval would serve nothing; the guard must refuse. (It weighed
    the 15 hidden families against all 100 families, 15% <= 20%, and wrote them.)"""
    mapped = '[sources.options.status_map]\nActive = "current"'
    deploy.configure(fraction=0.2, source_extra=mapped)
    for n in range(15):
        deploy.note(f"n{n:02d}", body(f"note {n}", f"rule {n}"), id=f"n{n:02d}",
                    status="Active", effective_from=day(-300 + n))  # fmt: skip
    for n in range(85):
        deploy.note(f"old{n:02d}", body(f"old {n}", f"old rule {n}"), id=f"old{n:02d}",
                    status="retired", effective_from=day(-900 + n))  # fmt: skip
    deploy.init_ingest()
    assert deploy.json("check")[0] == 0
    served = deploy.served()
    assert served == {f"hb:n{n:02d}" for n in range(15)}
    deploy.configure(fraction=0.2, source_extra=mapped.replace('"current"', '"retired"'))
    code, data = deploy.json("run")
    assert (code, data["refused"]) == (3, True), data["guard"]
    assert writes_zero(data)
    assert deploy.served() == served
