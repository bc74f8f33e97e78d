"""``manage.py singleton_locks``: the operator's ``celery locks`` commands in a Django project."""
