"""The permission to release a lock from the locks page, on a model with no table.

Django's permissions belong to a model; ``Lock`` is unmanaged (``migrate`` creates no table for it,
nothing is ever stored in it) and exists so that ``celery_singleton_lock.release_lock`` can be given to
a user or a group in the admin, and so the admin index links to the page.
"""

from __future__ import annotations

from django.db import models


class Lock(models.Model):
    """The locks of the lock store, as the admin index names them; no row is ever read or written."""

    class Meta:
        managed = False
        default_permissions = ()
        permissions = [("release_lock", "Can release a lock from the locks page")]
        verbose_name = "lock"
        verbose_name_plural = "locks"
