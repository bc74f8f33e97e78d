"""The test project's settings: the servers come from the environment the tests set."""
import json
import os

SECRET_KEY = "test-project-only"
DEBUG = False
ALLOWED_HOSTS = ["localhost"]
USE_TZ = True
TIME_ZONE = "UTC"
DEFAULT_AUTO_FIELD = "django.db.models.AutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "django_celery_results",
    "django_celery_beat",
    "celery_singleton_lock.contrib.django",  # manage.py check refuses wrong CELERY_SINGLETON_LOCK_* settings
    "shop",
]
DATABASES = {"default": {"ENGINE": "django.db.backends.sqlite3",
                         "NAME": os.environ.get("CSL_DJANGO_DB", "/tmp/csl-django-test.sqlite3"),
                         "OPTIONS": {"timeout": 30}}}

CELERY_BROKER_URL = os.environ.get("BROKER_REDIS_URL", "redis://localhost:6379/0")
CELERY_RESULT_BACKEND = "django-db"     # django-celery-results
CELERY_RESULT_EXTENDED = True           # task name, arguments and a duplicate's lock fields in each row
CELERY_SINGLETON_LOCK_URL = os.environ.get("LOCK_REDIS_URL", "redis://localhost:6379/1")
CELERY_SINGLETON_LOCK_TTL = 60          # app-wide default of every LockedTask's lock_ttl

# Django's error pages and error e-mails show settings: this filter masks the lock URL's password
DEFAULT_EXCEPTION_REPORTER_FILTER = "celery_singleton_lock.contrib.django.reporting.SafeExceptionReporterFilter"

# the test suite's own: STARTED states to wait on, one message per worker process at a time
CELERY_TASK_TRACK_STARTED = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TIMEZONE = "UTC"
CELERY_SINGLETON_LOCK_PREFIX = os.environ.get("CSL_TEST_PREFIX", "csltest")
if os.environ.get("CSL_LOCK_TRANSPORT_OPTIONS"):
    CELERY_SINGLETON_LOCK_TRANSPORT_OPTIONS = json.loads(os.environ["CSL_LOCK_TRANSPORT_OPTIONS"])
if os.environ.get("CSL_BROKER_PREFIX"):  # on a Redis the suite did not start: the run's keys only
    CELERY_BROKER_TRANSPORT_OPTIONS = {"global_keyprefix": os.environ["CSL_BROKER_PREFIX"]}

# The library logs to the "celery_singleton_lock" logger. It has no handler of its own and propagates:
# in a worker or beat, Celery's handlers (stderr, or the file --logfile names) write its lines in
# Celery's format; in the web process (publishing: a call skipped at enqueue, a lock store that did
# not answer) the root handler below does.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"timestamped": {"format": "[%(asctime)s: %(levelname)s/%(processName)s] %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "timestamped"}},
    "root": {"handlers": ["console"], "level": "WARNING"},
    "loggers": {
        "celery_singleton_lock": {"level": "INFO"},
    },
}
