"""The project's own tests, on the test settings (MemoryBackend, eager mode)."""
from django.test import TestCase

from .models import Order
from .services import place_order
from .tasks import sync_order


class SyncOrderTests(TestCase):
    def test_placing_an_order_syncs_it_after_the_commit(self):
        with self.captureOnCommitCallbacks(execute=True) as callbacks:
            order = place_order("blue mug")
        self.assertEqual(len(callbacks), 1)
        self.assertEqual(Order.objects.get(pk=order.pk).name, "blue mug")

    def test_a_task_runs_eagerly_under_the_lock(self):
        order = Order.objects.create(name="red mug")
        self.assertEqual(sync_order.delay(order.pk).get(), "red mug")
