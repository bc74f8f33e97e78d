"""Configuration: the task options and app settings, read once, checked, and masked where Celery prints them.

- ``options.py``: the task options (``lock_*``, ``on_lock*``), their app-wide defaults and checks.
- ``settings.py``: the app settings (``singleton_lock_url``, prefix, client options, a backend object).
- ``censor.py``: our settings masked wherever Celery prints settings.
- ``refused.py``: a refusal at definition kept and raised the same way at every later use; a worker
  or beat still starting ends on one with one line.

May import: ``exceptions``, ``store``.
"""
