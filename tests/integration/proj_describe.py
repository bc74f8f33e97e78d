"""The test app of :mod:`tests.integration.proj_signals`, storing a description of each call with its lock."""

from __future__ import annotations

from tests.integration.proj_signals import *  # noqa: F401,F403 - the tasks and the signal recorders
from tests.integration.proj import app

app.conf.singleton_lock_describe = True
