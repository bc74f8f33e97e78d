"""Hypothesis profiles: a thorough search in CI (``CI=true``), a quicker one on a workstation.

``CSL_HYPOTHESIS_PROFILE`` names one outright: the support matrix's cells run the quick one, since
the thorough search depends on no release of Celery or redis-py and runs once, on the main stack.
Tests that set ``max_examples`` themselves keep their own count. The properties live apart from
``tests/unit`` so that the unit tests stay a few seconds long whichever profile is loaded.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

from tests.support.threads import no_thread_leaks  # noqa: F401 - an autouse fixture

settings.register_profile("ci", max_examples=2_000, deadline=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None)
_in_ci = os.environ.get("CI", "").lower() in ("1", "true", "yes")
settings.load_profile(os.environ.get("CSL_HYPOTHESIS_PROFILE") or ("ci" if _in_ci else "dev"))
