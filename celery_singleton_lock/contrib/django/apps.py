"""The Django app's configuration: it registers the settings check once Django is ready."""

from __future__ import annotations

from django.apps import AppConfig


class SingletonLockConfig(AppConfig):
    name = "celery_singleton_lock.contrib.django"
    label = "celery_singleton_lock"
    verbose_name = "Celery singleton lock"

    def ready(self) -> None:
        from django.core import checks

        from .checks import check_lock_settings

        checks.register(check_lock_settings, "celery_singleton_lock")
