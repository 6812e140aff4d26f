"""Hypothesis profiles: ``ci`` (the default: what every run of the suite does) and
``thorough`` (ten times the examples, for a night or before a release), chosen by the
environment variable ``RECONCILER_HYPOTHESIS_PROFILE``.

``ci`` is Hypothesis' own ``ci`` profile, which it loads by itself where ``CI`` is set (as
``.ci/run`` has it): derandomised (the same examples on every machine, so a failure
reproduces), no deadline (a loaded 2-core machine is no reason to fail), no example database,
and the failing example printed as a blob. ``thorough`` is random again, without a deadline,
and keeps its database, to find what the fixed examples do not.

A property that sets its own number of examples asks ``examples(n)``: ``n`` under ``ci``,
``10 * n`` under ``thorough``; the others take the profile's ``max_examples``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

ENV = "RECONCILER_HYPOTHESIS_PROFILE"
PROFILES = ("ci", "thorough")
#: How many more examples ``thorough`` runs than ``ci``.
THOROUGH_FACTOR = 10

settings.register_profile(
    "ci",
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "thorough",
    max_examples=100 * THOROUGH_FACTOR,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def profile() -> str:
    """The profile in force: ``RECONCILER_HYPOTHESIS_PROFILE``, ``ci`` when unset."""
    name = os.environ.get(ENV, "ci") or "ci"
    if name not in PROFILES:
        raise ValueError(f"{ENV}={name!r}: the profiles are {', '.join(PROFILES)}")
    return name


def load_profile() -> None:
    settings.load_profile(profile())


def examples(ci: int) -> int:
    """The examples of a property that sets its own count: ``ci`` under the ``ci`` profile,
    ten times as many under ``thorough``."""
    return ci * THOROUGH_FACTOR if profile() == "thorough" else ci
