"""The test app of :mod:`tests.integration.proj`, serving the library's metrics on ``CSL_METRICS_PORT``."""

from __future__ import annotations

import os

from tests.integration.proj import *  # noqa: F401,F403 - the tasks
from tests.integration.proj import app

#: "9808" stands for the bare number 9808 (every documented form: 9808, ":9808", "host:9808").
_PORT = os.environ["CSL_METRICS_PORT"]
app.conf.singleton_lock_metrics_port = int(_PORT) if _PORT.isdigit() else _PORT
