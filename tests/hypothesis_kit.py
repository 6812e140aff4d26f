"""Hypothesis profiles: ``ci`` (the default: what every run of the suite does) and
``thorough`` (ten times the examples, for a night or before a release), chosen by the
environment variable ``RECONCILER_HYPOTHESIS_PROFILE``.

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

settings.register_profile("ci", print_blob=True)
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
