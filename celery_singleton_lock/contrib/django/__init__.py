"""The optional Django app: add ``"celery_singleton_lock.contrib.django"`` to ``INSTALLED_APPS`` and
``manage.py check`` (which ``runserver`` and ``migrate`` run too) refuses wrong
``CELERY_SINGLETON_LOCK_*`` settings before a deploy, not at the first call after it.

With ``path("locks/", include("celery_singleton_lock.contrib.django.urls"))`` the operator's page of
:mod:`celery_singleton_lock.web` is served to staff users and linked from the admin index; releasing
needs the permission ``celery_singleton_lock.release_lock`` (``models.py``, created by ``migrate``).

Django is imported here only, and only by the projects that list the app.
"""
