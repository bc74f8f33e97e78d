"""The description of a call stored with its lock (``singleton_lock_describe``): what it says, how long it gets."""

from __future__ import annotations

import pytest

from celery_singleton_lock import ConfigurationError
from celery_singleton_lock.calls.arguments import ArgumentKey
from celery_singleton_lock.calls.describe import MAX_CHARS, describe_call, describe_enabled


def sync(account_id, payload=None, full=False):
    """A task body's signature."""


def test_the_arguments_that_decide_the_lock_are_named_with_their_values() -> None:
    assert describe_call(ArgumentKey("t", sync, ("account_id",)), (42,), {"payload": "secret"}) == "account_id=42"
    assert describe_call(ArgumentKey("t", sync), ("a",), {}) == "account_id='a', payload=None, full=False"


def test_a_lock_key_function_is_described_by_its_string_as_is() -> None:
    key = ArgumentKey("t", sync, lambda account_id, **kw: f"acct:{account_id}")
    assert describe_call(key, (7,), {}) == "acct:7"


def test_a_long_or_strange_call_is_capped_and_kept_on_one_line() -> None:
    text = describe_call(ArgumentKey("t", sync, ("payload",)), (1, "x\ny" * 500), {})
    assert len(text) <= MAX_CHARS and "\n" not in text and text.endswith("…")
    assert describe_call(ArgumentKey("t", sync, lambda *a, **k: "a" * 500), (1,), {}) == "a" * (MAX_CHARS - 1) + "…"


def test_the_setting_is_off_by_default_and_must_be_a_bool() -> None:
    assert describe_enabled({}) is False
    assert describe_enabled({"singleton_lock_describe": True}) is True
    with pytest.raises(ConfigurationError, match="singleton_lock_describe must be True or False"):
        describe_enabled({"singleton_lock_describe": "yes"})
