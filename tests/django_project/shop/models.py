"""An order (what the web process saves) and a report run (what the beat job writes)."""
from django.db import models


class Order(models.Model):
    name = models.CharField(max_length=100)


class ReportRun(models.Model):
    started = models.DateTimeField(auto_now_add=True)
