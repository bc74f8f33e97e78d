"""docs/testing.md's test lines, as written, over the project's own settings (which name a lock URL)."""
from django.test import TestCase

from celery_singleton_lock.store import MemoryBackend
from proj.celery import app

from .models import Order
from .tasks import sync_order


class FaqRecipeTests(TestCase):
    def setUp(self):
        app.conf.singleton_lock_backend = MemoryBackend()   # instead of singleton_lock_url
        app.conf.task_always_eager = True                   # or run a worker in-process

    def test_the_recipe_runs_a_task_under_the_settings_lock_url(self):
        order = Order.objects.create(name="FAQ mug")
        self.assertTrue(app.conf.singleton_lock_url)
        self.assertEqual(sync_order.delay(order.pk).get(), "FAQ mug")
