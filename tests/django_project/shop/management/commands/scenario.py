"""``manage.py scenario NAME``: one scenario of the integration tests, run in a web-like process
against the real worker, printing what it saw as one JSON line."""
import json
import time

from celery.result import AsyncResult
from django.core.management.base import BaseCommand
from django_celery_beat.models import IntervalSchedule, PeriodicTask
from django_celery_results.models import TaskResult

from celery_singleton_lock import superseded
from proj.celery import app
from shop.models import Order, ReportRun
from shop.services import place_order
from shop.tasks import REPORT_EVERY, reprice_order, sync_order


def _until(what, check, timeout=30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.05)


def _row_meta(task_id):
    row = TaskResult.objects.get(task_id=task_id)
    return {"status": row.status, "result": json.loads(row.result), "meta": json.loads(row.meta)}


def duplicate():
    order = Order.objects.create(name="duplicate")
    holder = sync_order.delay(order.pk, duration=3.0)
    _until("the holder to start", lambda: AsyncResult(holder.id).state == "STARTED")
    dup = sync_order.delay(order.pk)
    return {"holder": holder.id, "dup": dup.id, "dup_result": dup.get(timeout=30),
            "holder_result": holder.get(timeout=30),
            "dup_meta": app.backend.get_task_meta(dup.id), "holder_meta": app.backend.get_task_meta(holder.id),
            "dup_row": _row_meta(dup.id), "holder_row": _row_meta(holder.id)}


def superseded_call():
    order = Order.objects.create(name="repriced")
    first = reprice_order.delay(order.pk, 1, duration=2.0)
    _until("the first price to start", lambda: AsyncResult(first.id).state == "STARTED")
    waiting = reprice_order.delay(order.pk, 2)
    newest = reprice_order.delay(order.pk, 3)
    results = {name: call.get(timeout=30) for name, call in
               (("first", first), ("waiting", waiting), ("newest", newest))}
    return {"results": results, "newest": newest.id,
            "superseded": {name: superseded(call) for name, call in
                           (("first", first), ("waiting", waiting), ("newest", newest))},
            "waiting_meta": app.backend.get_task_meta(waiting.id), "waiting_row": _row_meta(waiting.id)}


def on_commit():
    order = place_order(f"after commit {time.time()}")
    row = _until("the sync to be stored", lambda: TaskResult.objects.filter(
        task_name="shop.tasks.sync_order", result=json.dumps(order.name), status="SUCCESS").first())
    return {"synced": json.loads(row.result) == order.name}


def beat_schedule():
    every, _ = IntervalSchedule.objects.get_or_create(every=int(REPORT_EVERY), period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.update_or_create(name="nightly report",
                                          defaults={"task": "shop.tasks.nightly_report", "interval": every})
    ReportRun.objects.all().delete()
    return {}


def report_runs():
    return {"runs": [run.started.timestamp() for run in ReportRun.objects.order_by("started")]}


class Command(BaseCommand):
    def add_arguments(self, parser):
        parser.add_argument("name", choices=["duplicate", "superseded_call", "on_commit", "beat_schedule", "report_runs"])

    def handle(self, *args, name, **options):
        self.stdout.write(json.dumps(globals()[name](), default=str))
