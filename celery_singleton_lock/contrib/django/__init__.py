"""The optional Django app: add ``"celery_singleton_lock.contrib.django"`` to ``INSTALLED_APPS`` and
``manage.py check`` (which ``runserver`` and ``migrate`` run too) refuses wrong
``CELERY_SINGLETON_LOCK_*`` settings before a deploy, not at the first call after it.

Django is imported here only, and only by the projects that list the app.
"""
