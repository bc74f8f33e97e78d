"""The project's settings with the worker's /metrics served on the port CSL_METRICS_PORT names."""
import os

from .settings import *  # noqa: F401,F403

CELERY_SINGLETON_LOCK_METRICS_PORT = f"127.0.0.1:{os.environ['CSL_METRICS_PORT']}"
