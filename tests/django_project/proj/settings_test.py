"""Settings for the project's own tests (``manage.py test --settings=proj.settings_test``)."""
from celery_singleton_lock.store import MemoryBackend

from .settings import *  # noqa: F401,F403 - CELERY_SINGLETON_LOCK_URL included

CELERY_TASK_ALWAYS_EAGER = True              # tasks run in the test, in the caller
CELERY_TASK_EAGER_PROPAGATES = True          # an error in a task fails the test
CELERY_RESULT_BACKEND = "cache+memory://"   # no result rows to write from eager runs
CELERY_BROKER_URL = "memory://"
CELERY_SINGLETON_LOCK_BACKEND = MemoryBackend()   # wins over CELERY_SINGLETON_LOCK_URL
