"""A duplicate's outcome in the admin's ``TaskResult`` list (django-celery-results).

A skipped duplicate ends SUCCESS with result ``None``, as a run that returned ``None`` does; its
row's ``meta`` names the lock's key, the holder and the policy (docs/django.md). This admin is
django-celery-results' own, plus a "singleton lock" column (``duplicate (skip) of <holder id>``,
or ``-`` for a run that ran) and a list filter (duplicates, runs, or duplicates by policy). A
project registers it in place of the default one, in one of its apps' ``admin.py``::

    admin.site.unregister(TaskResult)
    admin.site.register(TaskResult, LockedTaskResultAdmin)

Only the rows shown are decoded, and the filter is one ``meta`` match in SQL: no lock store is read.
"""

from __future__ import annotations

import json
from typing import Any, List, Optional, Tuple

from django.contrib import admin
from django_celery_results.admin import TaskResultAdmin

__all__ = ["LockOutcomeFilter", "LockedTaskResultAdmin", "lock_outcome"]

#: What a duplicate's row may name as its policy (``on_locked``), in the filter's order.
POLICIES = ("skip", "retry", "wait", "raise", "replace")


def _meta(row: Any) -> dict:
    try:
        meta = json.loads(row.meta or "{}")
    except (TypeError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


@admin.display(description="singleton lock")
def lock_outcome(row: Any) -> str:
    """``duplicate (skip) of <holder id>`` for a duplicate's row, ``-`` for any other."""
    meta = _meta(row)
    holder = meta.get("singleton_lock_holder")
    if not holder:
        return "-"
    return f"duplicate ({meta.get('singleton_lock_policy', '?')}) of {holder}"


class LockOutcomeFilter(admin.SimpleListFilter):
    """Duplicates (the lock turned them away), runs, or duplicates of one policy."""

    title = "singleton lock"
    parameter_name = "singleton_lock"

    def lookups(self, request: Any, model_admin: Any) -> List[Tuple[str, str]]:
        return [("duplicate", "a duplicate"), ("ran", "not a duplicate"),
                *((policy, f"a duplicate ({policy})") for policy in POLICIES)]

    def queryset(self, request: Any, queryset: Any) -> Optional[Any]:
        value = self.value()
        if value == "duplicate":
            return queryset.filter(meta__contains='"singleton_lock_holder"')
        if value == "ran":
            return queryset.exclude(meta__contains='"singleton_lock_holder"')
        if value in POLICIES:  # the meta is JSON text: the policy's value follows its name
            return queryset.filter(meta__contains='"singleton_lock_holder"',
                                   meta__regex=rf'"singleton_lock_policy":\s*"{value}"')
        return queryset


class LockedTaskResultAdmin(TaskResultAdmin):
    """django-celery-results' ``TaskResult`` admin with the duplicate's outcome as a column and a filter."""

    list_display = (*TaskResultAdmin.list_display, lock_outcome)
    list_filter = (*TaskResultAdmin.list_filter, LockOutcomeFilter)
