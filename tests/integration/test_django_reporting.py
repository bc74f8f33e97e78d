"""Django's error pages in the test project: the DEBUG 500 page and the error e-mail to ``ADMINS``
mask the lock URL's password under the library's exception-reporter filter, which the project names
as docs/django.md says (``DEFAULT_EXCEPTION_REPORTER_FILTER``). The project's own tests
(``shop/error_reports.py``) render both with Django's test client and ``mail.outbox``, and show the
password in clear under Django's own filter. Under settings that name no filter
(``proj/settings_no_filter.py``), the app names the library's as Django starts."""

from __future__ import annotations

import pytest

from tests.integration.test_django import _manage, django_env  # noqa: F401 - the project's fixture


@pytest.mark.parametrize("settings", ["proj.settings", "proj.settings_no_filter"])
def test_the_debug_page_and_the_error_mail_mask_the_lock_password(django_env, settings):  # noqa: F811
    done = _manage(django_env, "test", "shop.error_reports", f"--settings={settings}", check=False)
    assert done.returncode == 0 and "OK" in done.stderr and "Ran 3 tests" in done.stderr, done.stderr
