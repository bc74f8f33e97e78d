"""The topology test app with a module-level ``SharedLock(limit=3)`` made without ``app=``.

On a quorum of masters (``CSL_LOCK_URLS``) a worker of this module must refuse to start:
a quorum keeps one place per key, and nothing else could tell before a task's first block.
"""

from __future__ import annotations

from celery_singleton_lock import SharedLock
from tests.integration.proj_topo import *  # noqa: F401,F403 - the tasks and the app on the topology

three_at_once = SharedLock("three-at-once", limit=3)
