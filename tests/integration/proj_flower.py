"""The test app of :mod:`tests.integration.proj`, storing extended results (``result_extended``)."""

from __future__ import annotations

from tests.integration.proj import *  # noqa: F401,F403 - the tasks
from tests.integration.proj import app

app.conf.result_extended = True
