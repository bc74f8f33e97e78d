"""The Django app's configuration: once Django is ready, it registers the settings check and names the
error-report filter that masks the lock URL's password (unless the project named one)."""

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

        from .reporting import install_default_filter

        install_default_filter()  # error pages mask the lock URL's password unless the project chose a filter
