"""The test app of :mod:`tests.integration.proj` with a crontab-like beat job, for the tick-keyed recipe.

``AlignedEvery(seconds)`` ticks at the multiples of ``seconds`` on the clock, as a crontab ticks
at its minutes, so a test sees in seconds what a daily crontab does in days: a beat restarted
after a missed tick publishes that tick at once (late), and the next tick comes on the clock. The
job follows docs/beat.md's crontab recipe, ``lock_key=tick_key(schedule)`` with a window of one
period; ``CSL_TICK_TASK=windowed`` schedules the interval recipe's job instead
(``lock_window=0.9 * period``, no tick key), which turns away the tick after a late one.
"""

from __future__ import annotations

import json
import math
import os
import time
from datetime import datetime, timezone

from celery.schedules import BaseSchedule, schedstate

from celery_singleton_lock import LockedTask, tick_key
from tests.integration.proj import app, events

PERIOD = float(os.environ.get("CSL_TICK_SECONDS", "10"))


class AlignedEvery(BaseSchedule):
    """Ticks at the multiples of ``seconds`` since the epoch: a crontab of seconds."""

    def __init__(self, seconds: float, nowfun=None, app=None) -> None:
        super().__init__(nowfun=nowfun, app=app)
        self.seconds = seconds

    def _following(self, moment: datetime) -> datetime:
        return datetime.fromtimestamp((math.floor(moment.timestamp() / self.seconds) + 1) * self.seconds, timezone.utc)

    def remaining_estimate(self, last_run_at):
        return self._following(self.maybe_make_aware(last_run_at)) - self.now()

    def is_due(self, last_run_at):
        remaining = self.remaining_estimate(last_run_at).total_seconds()
        if remaining <= 0:
            now = self.now()
            return schedstate(True, (self._following(now) - now).total_seconds())
        return schedstate(False, remaining)

    def __reduce__(self):
        return self.__class__, (self.seconds,)

    def __repr__(self) -> str:
        return f"<AlignedEvery {self.seconds}s>"

    def __eq__(self, other):
        return isinstance(other, AlignedEvery) and other.seconds == self.seconds

    def __hash__(self):
        return hash(("AlignedEvery", self.seconds))


SCHEDULE = AlignedEvery(PERIOD, app=app)


def _record(task) -> None:
    events().rpush("tick-runs", json.dumps(dict(task=task.name, id=task.request.id, start=time.time())))


@app.task(shared=False, base=LockedTask, bind=True, lock_scope="queued_or_running", lock_key=tick_key(SCHEDULE),
          lock_window=float(os.environ.get("CSL_TICK_WINDOW", PERIOD)))  # the recipe's one period; shorter to see why
def ticked(self):
    _record(self)


@app.task(shared=False, base=LockedTask, bind=True, lock_scope="queued_or_running", lock_window=0.9 * PERIOD)
def windowed(self):
    _record(self)


app.conf.beat_schedule = {
    "job": {"task": f"tests.integration.proj_ticks.{os.environ.get('CSL_TICK_TASK', 'ticked')}",
            "schedule": SCHEDULE},
}
