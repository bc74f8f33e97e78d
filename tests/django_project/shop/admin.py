"""The shop's admin: django-celery-results' TaskResult list with a duplicate's outcome (docs/django.md)."""
from django.contrib import admin
from django_celery_results.models import TaskResult

from celery_singleton_lock.contrib.django.results_admin import LockedTaskResultAdmin

admin.site.unregister(TaskResult)
admin.site.register(TaskResult, LockedTaskResultAdmin)
