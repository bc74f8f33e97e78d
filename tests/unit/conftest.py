"""The unit tests' fixtures. This conftest loads neither Redis nor the worker helpers
(``test_light_conftest.py`` holds it to that); the hypothesis searches live in ``tests/properties``."""

from __future__ import annotations

from tests.support.apps import close_made_apps  # noqa: F401 - an autouse fixture
from tests.support.threads import no_thread_leaks  # noqa: F401 - an autouse fixture
