"""The test app of :mod:`tests.integration.proj`, with receivers on the library's signals.

Connected at module level as users do (``weak=False`` and a ``dispatch_uid``); each
receiver records what it was sent in the events Redis, so a test sees which signals
a real worker sent, and when.
"""

from __future__ import annotations

import json
import time

from celery_singleton_lock import lock_acquired, lock_conflict, lock_lost, lock_released
from tests.integration.proj import *  # noqa: F401,F403 - the tasks
from tests.integration.proj_latest import *  # noqa: F401,F403 - the tasks whose newest call wins
from tests.integration.proj import events


def _recorder(name: str):
    def record(sender=None, key=None, task_id=None, **kwargs):
        fields = {k: v for k, v in kwargs.items() if isinstance(v, (str, int, float, bool, type(None)))}
        events().rpush("signals", json.dumps(dict(signal=name, task=getattr(sender, "name", None), key=key,
                                                  task_id=task_id, sent=time.time(), **fields)))
    return record


for _signal in (lock_acquired, lock_conflict, lock_released, lock_lost):
    _signal.connect(_recorder(_signal.name), weak=False, dispatch_uid=f"tests.proj_signals.{_signal.name}")
