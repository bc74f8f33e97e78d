"""Django's error pages and error e-mails without the lock store's password.

Django hides a setting by its name (``PASS``, ``KEY``, ``SECRET``, ``TOKEN``...): neither
``CELERY_SINGLETON_LOCK_URL`` nor ``CELERY_SINGLETON_LOCK_TRANSPORT_OPTIONS`` matches, so the
DEBUG 500 page and every error e-mail sent to ``ADMINS`` printed the lock URL's password. Name
this filter in the project's settings::

    DEFAULT_EXCEPTION_REPORTER_FILTER = "celery_singleton_lock.contrib.django.reporting.SafeExceptionReporterFilter"

With ``celery_singleton_lock.contrib.django`` in ``INSTALLED_APPS`` and no filter named in the
settings, the app names this one as it starts (:func:`install_default_filter`): a project that
chose a filter of its own keeps it (subclass this one to keep the masking).

It keeps everything Django's own filter hides, and masks as ``celery report`` does: our URL
settings under any namespace with the password masked and the hosts readable, our client options
with every secret-sounding value masked, and any other setting or local variable of a traceback
frame whose text holds a URL with a password (the broker's, a lock URL read into a variable).
"""

from __future__ import annotations

import re
from typing import Any, List, Tuple

from django.views.debug import SafeExceptionReporterFilter as DjangoFilter

from ...config.censor import censor_settings
from ...store import redact

__all__ = ["SafeExceptionReporterFilter", "install_default_filter", "FILTER_PATH"]

#: The filter's dotted path, as ``DEFAULT_EXCEPTION_REPORTER_FILTER`` names it.
FILTER_PATH = "celery_singleton_lock.contrib.django.reporting.SafeExceptionReporterFilter"

#: A URL whose authority has an ``@`` (credentials), up to the next blank or quote: what is shown
#: of it is :func:`redact`'s reading, which masks more rather than less.
_URL_WITH_CREDENTIALS = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*@[^\s'\"<>]*")


def _mask_urls(text: str) -> str:
    """``text`` with every URL that carries credentials redacted."""
    return _URL_WITH_CREDENTIALS.sub(lambda found: redact(found.group(0)), text)


def _mask(value: Any) -> Any:
    """A string with its URLs' passwords masked; containers masked item by item; other values as they are."""
    if isinstance(value, str):
        return _mask_urls(value)
    if isinstance(value, dict):
        return {key: _mask(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_mask(item) for item in value)
    return value


class SafeExceptionReporterFilter(DjangoFilter):
    """Django's filter, plus the lock store's secrets (see the module's docstring)."""

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        cleansed = super().cleanse_setting(key, value)
        if cleansed is self.cleansed_substitute:
            return cleansed
        censored = censor_settings({key: cleansed})[key]
        return _mask(censored)

    def get_traceback_frame_variables(self, request: Any, tb_frame: Any) -> List[Tuple[str, Any]]:
        shown = []
        for name, value in super().get_traceback_frame_variables(request, tb_frame):
            shown.append((name, self._masked_variable(value)))
        return shown

    @staticmethod
    def _masked_variable(value: Any) -> Any:
        """A variable as the page prints it (its ``repr``): replaced by that text, masked, when the text
        holds a URL with credentials (a settings object, an app's conf, an error's arguments)."""
        try:
            text = repr(value)
        except Exception:  # a broken __repr__: Django prints its own note for it
            return value
        masked_text = _mask_urls(text)
        return value if masked_text == text else _Shown(masked_text)


def install_default_filter() -> bool:
    """Name this filter in the settings when the project named none (Django's default would show the
    lock URL's password); whether it did. Run by the app as Django starts, before any request."""
    from django.conf import settings

    if settings.is_overridden("DEFAULT_EXCEPTION_REPORTER_FILTER"):
        return False
    settings.DEFAULT_EXCEPTION_REPORTER_FILTER = FILTER_PATH
    return True


class _Shown:
    """A masked variable: printed as its masked text, without quotes."""

    def __init__(self, text: str) -> None:
        self._text = text

    def __repr__(self) -> str:
        return self._text
