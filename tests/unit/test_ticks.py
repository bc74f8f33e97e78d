"""``tick_key``: a beat job's key is the schedule's latest tick at or before the publisher's clock."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from celery import Celery
from celery.schedules import crontab, schedule

from celery_singleton_lock import ConfigurationError, tick_key
from celery_singleton_lock.calls.ticks import latest_tick


def _at(*fields: int) -> datetime:
    return datetime(*fields, tzinfo=timezone.utc)


@pytest.fixture
def app():
    app = Celery("ticks", set_as_current=False)
    app.conf.timezone = "UTC"
    return app


def test_a_daily_crontabs_late_run_and_the_next_tick_have_keys_of_their_own(app):
    nightly = crontab(hour=3, minute=0, app=app)
    late = latest_tick(nightly, _at(2026, 11, 28, 2, 59, 0))  # yesterday's 03:00, published a day late
    on_time = latest_tick(nightly, _at(2026, 11, 28, 3, 0, 0))
    second_beat = latest_tick(nightly, _at(2026, 11, 28, 3, 0, 40))
    assert late == _at(2026, 11, 27, 3, 0) and on_time == second_beat == _at(2026, 11, 28, 3, 0)


@pytest.mark.parametrize("spec, now, tick", [
    (dict(minute="*/15"), _at(2026, 11, 28, 10, 44, 59), _at(2026, 11, 28, 10, 30)),
    (dict(minute=0, hour=0, day_of_month=1), _at(2026, 3, 1, 0, 0, 0), _at(2026, 3, 1, 0, 0)),
    (dict(minute=0, hour=0, day_of_month=1), _at(2026, 2, 28, 23, 59), _at(2026, 2, 1, 0, 0)),
    (dict(minute=30, hour=6, day_of_week="mon"), _at(2026, 11, 29, 12, 0), _at(2026, 11, 23, 6, 30)),
])
def test_the_latest_tick_of_crontabs(app, spec, now, tick):
    assert latest_tick(crontab(app=app, **spec), now) == tick


@pytest.mark.parametrize("clock", [_at(2026, 11, 28, 12, 0), _at(2026, 11, 29, 0, 5), _at(2031, 5, 6, 7, 8)])
def test_the_latest_tick_does_not_depend_on_the_schedules_clock(app, clock):
    # Given the schedule's clock on any date (Celery before 5.7 reads a crontab's last run against
    # its clock's date), when the latest tick before another moment is asked for,
    hourly, quarterly = crontab(minute=30, app=app), crontab(minute="*/15", app=app)
    hourly.nowfun = quarterly.nowfun = lambda: clock
    # then it is that moment's: just after midnight, yesterday's last tick; within an hour, its quarter
    assert latest_tick(hourly, _at(2026, 11, 29, 0, 5)) == _at(2026, 11, 28, 23, 30)
    assert latest_tick(quarterly, _at(2026, 11, 28, 10, 44, 59)) == _at(2026, 11, 28, 10, 30)


def test_a_publish_a_moment_early_counts_as_its_tick(app):
    nightly = crontab(hour=3, minute=0, app=app)
    nightly.nowfun = lambda: _at(2026, 11, 28, 2, 59, 59, 600000)
    assert tick_key(nightly)() == "2026-11-28T03:00:00+00:00"


def test_an_interval_schedule_works_too(app):
    every = schedule(timedelta(minutes=10), app=app)
    now = _at(2026, 11, 28, 10, 0)
    assert now - timedelta(minutes=10) < latest_tick(every, now) <= now


def test_something_that_is_no_schedule_is_refused_naming_it():
    with pytest.raises(ConfigurationError, match="needs a Celery schedule .* not int"):
        tick_key(3600)
