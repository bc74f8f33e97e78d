"""The test app of :mod:`tests.integration.proj`, with the lock on another topology.

``CSL_LOCK_URLS`` (comma-separated: a Redlock quorum) or ``CSL_LOCK_URL`` (one URL:
Redis, ``redis+cluster://`` or ``sentinel://``), and ``CSL_LOCK_OPTIONS`` (JSON:
``singleton_lock_transport_options``) choose where the locks live, so test and
workers agree.
"""

from __future__ import annotations

import json
import os

from tests.integration.proj import *  # noqa: F401,F403 - the tasks
from tests.integration.proj import app

_urls = os.environ.get("CSL_LOCK_URLS")
if _urls:
    app.conf.singleton_lock_url = _urls.split(",")
if os.environ.get("CSL_LOCK_OPTIONS"):
    app.conf.singleton_lock_transport_options = json.loads(os.environ["CSL_LOCK_OPTIONS"])
