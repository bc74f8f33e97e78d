"""A beat job's lock keyed by the schedule's tick: ``lock_key=tick_key(schedule)``.

Two beat processes publishing one schedule run a job once per tick when a window keeps the
tick's place: the beat guide's recipe (docs/beat.md) for an interval schedule is
``lock_window=0.9 * period``. A crontab is different: after a beat restart (or a deploy that kept
it down over a tick), beat publishes the missed tick at once, late, and a window counted from that late publish turned away
the next on-schedule tick, however short the gap (a lost day for a daily job). Keyed by the
tick it belongs to, each tick has a lock of its own: the late run is its missed tick's, the next
tick finds a fresh key, and the second beat's publish of any tick finds that tick's place taken,
for as long as the window (which no longer has to be shorter than anything) keeps it.

The tick of a publish is the schedule's latest tick at or before the publisher's clock (less a
second's tolerance for a beat that fires a moment early), found through the schedule's own
``remaining_estimate``, so a crontab, an interval or a schedule class of your own all work.
Each probe asks a copy of the schedule whose clock reads the probed moment: Celery before 5.7
computes a crontab's next run differently when the last run is not on its clock's date, so a
probe of yesterday (after midnight, the latest tick may be yesterday's) asked of today's clock
skipped ticks.
The key is computed where the call is published (beat), and the message carries it to the
worker (the enqueue lock of ``lock_scope="queued_or_running"``).
"""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Optional

from ..exceptions import ConfigurationError

__all__ = ["tick_key", "latest_tick"]

#: A beat may publish a moment before the tick it means (its clock, its sleep): that moment counts as the tick.
EARLY = timedelta(seconds=1)

#: How far back a tick is looked for: a schedule with none in this long has no latest tick.
HORIZON = timedelta(days=800)


def _at_moment(schedule: Any, moment: datetime) -> Any:
    """A copy of ``schedule`` whose clock reads ``moment`` (Celery's schedules read ``nowfun`` first)."""
    probe = copy.copy(schedule)
    probe.nowfun = lambda: moment
    return probe


def _next_after(schedule: Any, moment: datetime) -> datetime:
    """The schedule's first tick after ``moment``, to the second (its ``remaining_estimate`` is from its clock)."""
    probe = _at_moment(schedule, moment)
    at = probe.now() + probe.remaining_estimate(moment)
    return at.replace(microsecond=0) + (timedelta(seconds=1) if at.microsecond >= 500000 else timedelta(0))


def latest_tick(schedule: Any, now: Optional[datetime] = None) -> datetime:
    """The schedule's latest tick at or before ``now`` (default: the schedule's clock, plus :data:`EARLY`)."""
    now = (now or schedule.now() + EARLY)
    lookback = timedelta(seconds=1)
    while lookback <= HORIZON:
        tick = _next_after(schedule, now - lookback)
        if tick <= now:
            while True:  # a few steps: the lookback doubled only until one tick fell inside it
                following = _next_after(schedule, tick)
                if following <= tick or following > now:
                    return tick
                tick = following
        lookback *= 2
    raise ConfigurationError(f"schedule {schedule!r} has no tick in the {HORIZON.days} days before {now}: "
                             "tick_key needs a schedule that ticks")


def tick_key(schedule: Any) -> Callable[..., str]:
    """A ``lock_key`` function for a beat job on ``schedule``: the call's key is its tick (UTC, ISO 8601).

    The function ignores the call's arguments: a job called with arguments that should also
    decide its lock wraps it (``lambda region: f"{region}@{tick(region)}"``).
    """
    if not callable(getattr(schedule, "remaining_estimate", None)) or not callable(getattr(schedule, "now", None)):
        raise ConfigurationError(f"tick_key needs a Celery schedule (crontab, schedule, or a BaseSchedule of "
                                 f"yours), not {type(schedule).__name__}")

    def tick(*args: Any, **kwargs: Any) -> str:
        return latest_tick(schedule).astimezone(timezone.utc).isoformat()

    tick.__qualname__ = f"tick_key({schedule!r})"
    return tick
