"""The admin, and the locks page as docs/web.md mounts it."""
from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("locks/", include("celery_singleton_lock.contrib.django.urls")),
]
