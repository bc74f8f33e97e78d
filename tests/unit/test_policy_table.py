"""The duplicate policy table covers exactly the ``on_locked`` values the options accept."""

from celery_singleton_lock.config import options
from celery_singleton_lock.run import policy


def test_every_on_locked_value_has_one_policy_and_every_policy_a_value():
    assert set(policy.ON_LOCKED) == set(options.ON_LOCKED)
    assert all(name == entry.name for name, entry in policy.ON_LOCKED.items())
