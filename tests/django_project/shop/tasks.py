"""The shop's tasks: one run at a time per order, and a beat job run once per tick by two beats."""
import time

from celery import shared_task

from celery_singleton_lock import LockedTask

from .models import Order, ReportRun


@shared_task(base=LockedTask, lock_key=("order_id",))
def sync_order(order_id, duration=0.0):
    time.sleep(duration)  # the work
    return Order.objects.get(pk=order_id).name


@shared_task(base=LockedTask, lock_key=("order_id",), lock_scope="queued", on_locked="replace")
def reprice_order(order_id, price, duration=0.0):
    time.sleep(duration)  # the work: only the newest price of an order is worth computing
    return price


REPORT_EVERY = 2.0  # seconds: the PeriodicTask's interval


@shared_task(base=LockedTask, lock_scope="queued_or_running", lock_window=0.9 * REPORT_EVERY)
def nightly_report():
    ReportRun.objects.create()
