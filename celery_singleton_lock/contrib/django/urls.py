"""The locks page in a Django project: ``path("locks/", include("celery_singleton_lock.contrib.django.urls"))``."""

from __future__ import annotations

from django.urls import path

from . import views

app_name = "celery_singleton_lock"

urlpatterns = [
    path("", views.index, name="index"),
    path("lock", views.lock_page, name="lock"),
    path("api/locks", views.api_locks, name="api_locks"),
    path("api/lock", views.api_lock, name="api_lock"),
    path("api/release", views.api_release, name="api_release"),
    path("static/<str:name>", views.static, name="static"),
]
