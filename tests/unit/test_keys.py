"""Where a task's keys live: one Redis Cluster slot per lock whatever the task's name, names kept apart."""

from __future__ import annotations

import pytest
from redis.crc import key_slot

from celery_singleton_lock.store import KeyLayout

LAYOUT = KeyLayout("p")
#: Names that put a brace or the escape where the hash tag starts, and plain ones.
NAMES = ["billing.charge", "}", "}x", "}}", "}:0}", "\\", "\\x", "\\}x", "a}b", "{a", "a{b}c", "x}", "}{", "é}"]


def _keys(task: str, digest: str):
    keys = LAYOUT.keys(task, digest, "queued")
    return keys.lock, keys.queued, keys.fence, keys.done


@pytest.mark.parametrize("task", NAMES)
@pytest.mark.parametrize("digest", ["0" * 32, "a1" * 16, "f" * 32])
def test_the_keys_of_one_lock_share_a_slot_whatever_the_task_name(task, digest):
    # Given a task name (one starting with '}' would leave Redis an empty hash tag), when its
    # lock's keys are derived, then Redis Cluster puts them all in one slot
    slots = {key_slot(key.encode()) for key in _keys(task, digest)}
    assert len(slots) == 1, (task, _keys(task, digest))


def test_no_two_task_names_share_a_key():
    # Given names that differ only by the escape in front, then their keys differ
    keys = [LAYOUT.lock(task, "0" * 32) for task in NAMES]
    assert len(set(keys)) == len(NAMES)


@pytest.mark.parametrize("task", NAMES)
def test_a_key_names_its_task_and_rest_again(task):
    keys = LAYOUT.keys(task, "ab" * 16, "queued")
    assert LAYOUT.split(keys.lock) == (task, "ab" * 16)
    assert LAYOUT.split(keys.queued) == (task, "ab" * 16 + ":queued")
    assert LAYOUT.split(keys.fence) == (task, "fence")


def test_plain_task_names_keep_their_keys():
    # Keys of ordinary names are what earlier releases wrote (workers of both meet on them)
    assert LAYOUT.lock("billing.charge", "a" + "0" * 31) == "p:{billing.charge:a}:a" + "0" * 31
    assert LAYOUT.pattern("billing.charge") == "p:{billing.charge:?}:*"
    assert LAYOUT.pattern() == "p:{*:?}:*"


def test_a_task_pattern_escapes_glob_characters_and_the_tag_escape():
    assert LAYOUT.pattern("a*b?[c]") == "p:{a\\*b\\?\\[c\\]:?}:*"
    assert LAYOUT.pattern("}x") == "p:{\\\\}x:?}:*"
