"""The operator's web view: the locks of an app in a browser, standalone or mounted in any WSGI host.

- ``app.py``: :func:`wsgi_app`, the routes; ``locks.py``: what the page and ``/api/*`` read and how a
  release goes (the same records and rules as ``celery locks``); ``guard.py``: the bearer token and the
  CSRF token; ``pages.py``: the page files beside the code, filled with escaped values; ``serve.py``:
  ``celery locks web``'s server. The markup is in ``templates/``, the scripts in ``static/``.

Only the standard library (``wsgiref``) and what the package already needs; Django's mount lives in
``contrib/django`` and reuses these pieces.

May import: ``exceptions``, ``printable``, ``store``, ``config``, ``runtime``; never ``run``,
``enqueue`` or ``worker``.
"""

from .app import wsgi_app

__all__ = ["wsgi_app"]
