"""The locks page's views in Django: the page and JSON of :mod:`celery_singleton_lock.web`, for staff only.

Anonymous users and users who are not staff go to the admin login. A release needs the permission
``celery_singleton_lock.release_lock`` (a superuser has every permission); its CSRF token is Django's
own, checked by Django's middleware before the view runs. The Celery app is Celery's current app,
the one a Django project's ``proj/celery.py`` loads with Django.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from celery import current_app
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.middleware.csrf import get_token
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from ...web import pages
from ...web.app import read_post
from ...web.locks import Answer, LockView

PERMISSION = "celery_singleton_lock.release_lock"


@lru_cache(maxsize=None)
def _view(app: Any) -> LockView:
    return LockView(app)


def _json(answer: Answer) -> JsonResponse:
    response = JsonResponse(answer.body, status=answer.status, safe=False)
    response["Cache-Control"] = "no-store"
    return response


def _page(request: HttpRequest, name: str) -> HttpResponse:
    html = pages.page(name, csrf=get_token(request), allow_release=request.user.has_perm(PERMISSION),
                      back=reverse("admin:index"), back_label="Django admin")
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    for header, value in pages.SECURITY_HEADERS:
        response[header] = value
    return response


@staff_member_required
@require_GET
def index(request: HttpRequest) -> HttpResponse:
    return _page(request, "index")


@staff_member_required
@require_GET
def lock_page(request: HttpRequest) -> HttpResponse:
    return _page(request, "lock")


@staff_member_required
@require_GET
def api_locks(request: HttpRequest) -> JsonResponse:
    return _json(_view(current_app._get_current_object()).locks(request.GET.get("task") or None))


@staff_member_required
@require_GET
def api_lock(request: HttpRequest) -> JsonResponse:
    return _json(_view(current_app._get_current_object()).lock(request.GET.get("key", "")))


@staff_member_required
@require_POST
def api_release(request: HttpRequest) -> JsonResponse:
    if not request.user.has_perm(PERMISSION):
        return _json(Answer(403, {"error": f"releasing needs the permission {PERMISSION}"}))
    try:
        fields = read_post(request.content_type or "", request.body)
    except (ValueError, UnicodeDecodeError) as exc:
        return _json(Answer(400, {"error": f"the request body cannot be read: {exc}"}))
    who = f"{request.user.get_username()} (Django)"
    force = (fields.get("force") or "").lower() in ("1", "true", "yes", "on")
    return _json(_view(current_app._get_current_object()).release(fields.get("key", ""), force=force, who=who))


@staff_member_required
@require_GET
def static(request: HttpRequest, name: str) -> HttpResponse:
    found = pages.static(name)
    if found is None:
        return _json(Answer(404, {"error": f"no file {name}"}))
    response = HttpResponse(found[0], content_type=found[1])
    response["X-Content-Type-Options"] = "nosniff"
    return response


__all__ = ["index", "lock_page", "api_locks", "api_lock", "api_release", "static"]
