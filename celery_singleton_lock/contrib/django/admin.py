"""The admin index links to the locks page: ``Locks`` under the app, for every staff user."""

from __future__ import annotations

from typing import Any, Optional

from django.contrib import admin
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import NoReverseMatch, reverse

from .models import Lock


@admin.register(Lock)
class LockAdmin(admin.ModelAdmin):
    """No rows: the change list is the locks page (``celery_singleton_lock.contrib.django.urls``)."""

    def has_module_permission(self, request: HttpRequest) -> bool:
        return bool(request.user.is_active and request.user.is_staff)

    def has_view_permission(self, request: HttpRequest, obj: Optional[Any] = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj: Optional[Any] = None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj: Optional[Any] = None) -> bool:
        return False

    def changelist_view(self, request: HttpRequest, extra_context: Optional[dict] = None) -> HttpResponse:
        try:
            return HttpResponseRedirect(reverse("celery_singleton_lock:index"))
        except NoReverseMatch:
            raise Http404('the locks page is not mounted: add path("locks/", '
                          'include("celery_singleton_lock.contrib.django.urls")) to the project\'s URLs') from None
