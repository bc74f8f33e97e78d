"""The lock store's password on Django's error pages: the DEBUG 500 page and the e-mail to ``ADMINS``.

The project names the library's filter (``DEFAULT_EXCEPTION_REPORTER_FILTER``, docs/django.md);
each test also shows the page or mail under Django's own filter, where the password is in clear,
so a test that passes proves the library's filter masked it. Run by its label,
``manage.py test shop.error_reports`` (tests/integration/test_django_reporting.py): its name keeps it
out of ``manage.py test shop``, the project's documented tests.
"""
from django.conf import settings
from django.core import mail
from django.http import HttpResponse
from django.test import Client, SimpleTestCase, override_settings
from django.urls import path
from django.views import debug

PASSWORD = "-".join(["reporting", "pw", "5e2c"])  # not in the source lines the page quotes
LOCK_URL = f"redis://:{PASSWORD}@locks.internal:6379/1"
DJANGO_FILTER = "django.views.debug.SafeExceptionReporterFilter"


def failing_view(request):
    lock_url = settings.CELERY_SINGLETON_LOCK_URL  # a local variable: shown on the page with the frame
    raise RuntimeError(f"the view failed near {len(lock_url)} characters of URL")


urlpatterns = [path("boom/", failing_view), path("ok/", lambda request: HttpResponse("ok"))]


@override_settings(ROOT_URLCONF=__name__, CELERY_SINGLETON_LOCK_URL=LOCK_URL,
                   CELERY_SINGLETON_LOCK_TRANSPORT_OPTIONS={"ssl_password": PASSWORD, "socket_timeout": 5},
                   ADMINS=[("ops", "ops@example.com")], ALLOWED_HOSTS=["testserver"])
class ErrorReportTests(SimpleTestCase):
    def setUp(self):
        debug.get_default_exception_reporter_filter.cache_clear()  # Django caches the filter it names
        self.addCleanup(debug.get_default_exception_reporter_filter.cache_clear)

    def _debug_page(self):
        with override_settings(DEBUG=True):
            response = Client(raise_request_exception=False).get("/boom/", HTTP_ACCEPT="text/html")
        self.assertEqual(response.status_code, 500)
        return response.content.decode()

    def _mailed_report(self):
        mail.outbox = []
        with override_settings(DEBUG=False):  # the mail_admins handler of Django's default logging
            response = Client(raise_request_exception=False).get("/boom/")
        self.assertEqual(response.status_code, 500)
        self.assertEqual(len(mail.outbox), 1)
        message = mail.outbox[0]
        return message.body + "".join(str(content) for content, _ in message.alternatives)

    def test_the_debug_page_masks_the_lock_password_and_keeps_the_host(self):
        page = self._debug_page()
        self.assertIn("CELERY_SINGLETON_LOCK_URL", page)
        self.assertIn("locks.internal", page)
        self.assertIn("lock_url", page)
        self.assertNotIn(PASSWORD, page)

    def test_the_mailed_report_masks_the_lock_password(self):
        report = self._mailed_report()
        self.assertIn("CELERY_SINGLETON_LOCK_URL", report)
        self.assertIn("locks.internal", report)
        self.assertNotIn(PASSWORD, report)

    def test_under_djangos_own_filter_the_password_is_in_clear(self):
        with override_settings(DEFAULT_EXCEPTION_REPORTER_FILTER=DJANGO_FILTER):
            debug.get_default_exception_reporter_filter.cache_clear()
            self.assertIn(PASSWORD, self._debug_page())
            self.assertIn(PASSWORD, self._mailed_report())
