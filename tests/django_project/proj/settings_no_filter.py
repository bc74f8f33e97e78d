"""The project's settings without ``DEFAULT_EXCEPTION_REPORTER_FILTER``: the app names its own."""
from .settings import *  # noqa: F401,F403

del DEFAULT_EXCEPTION_REPORTER_FILTER  # noqa: F821
