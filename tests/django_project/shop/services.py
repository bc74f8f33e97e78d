"""What a view calls: save the order, and sync it once the row is committed."""
from django.db import transaction

from .models import Order
from .tasks import sync_order


def place_order(name):
    with transaction.atomic():
        order = Order.objects.create(name=name)
        transaction.on_commit(lambda: sync_order.delay(order.pk))
    return order
