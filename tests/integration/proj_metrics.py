"""The test app of :mod:`tests.integration.proj`, serving the library's metrics on ``CSL_METRICS_PORT``."""

from __future__ import annotations

import os

from tests.integration.proj import *  # noqa: F401,F403 - the tasks
from tests.integration.proj import app

app.conf.singleton_lock_metrics_port = os.environ["CSL_METRICS_PORT"]
