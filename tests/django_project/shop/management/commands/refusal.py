"""``manage.py refusal TASK...``: call each task three times in turn, as requests would when a lock setting
or a task's option is refused, and render Django's debug page for each error; prints what each call raised
as one JSON line."""
import json
import sys

from django.core.management.base import BaseCommand
from django.test import RequestFactory
from django.test.utils import override_settings
from django.utils.module_loading import import_string
from django.views.debug import technical_500_response


urlpatterns = []  # the debug page's URL conf (the project serves no views)


def _call(task):
    try:
        task.delay(1)
    except Exception as exc:
        try:
            with override_settings(DEBUG=True, ROOT_URLCONF=__name__):
                page = technical_500_response(RequestFactory().get("/", SERVER_NAME="localhost"), *sys.exc_info())
            rendered = {"status": page.status_code, "names_error": type(exc).__name__ in page.content.decode()}
        except Exception as crash:  # Django's own page failed to render the error
            rendered = {"crashed": f"{type(crash).__name__}: {crash}"}
        return {"error": type(exc).__name__, "message": str(exc), "page": rendered}
    return {"error": None}


class Command(BaseCommand):
    requires_system_checks = []  # a project that skipped manage.py check

    def add_arguments(self, parser):
        parser.add_argument("tasks", nargs="+", help="tasks' dotted paths, e.g. shop.tasks.sync_order")

    def handle(self, *args, tasks, **options):
        tasks = [import_string(path) for path in tasks]
        self.stdout.write(json.dumps([_call(task) for _ in range(3) for task in tasks]))
