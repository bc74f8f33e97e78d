"""Key derivation: signature binding, canonical encoding, digest (pure functions, no Redis)."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kombu.serialization import dumps, loads

from celery_singleton_lock import ConfigurationError, UnencodableArgumentError
from celery_singleton_lock.arguments import ArgumentKey


def refresh(account_id, full=False):
    pass


def test_positional_keyword_and_defaulted_spellings_are_one_key():
    key = ArgumentKey("t", refresh)
    assert key((1,), {}) == key((), {"account_id": 1}) == key((1, False), {}) == key((1,), {"full": False})
    assert key((1,), {}) != key((1, True), {})


def test_json_round_trip_equality_decides():
    key = ArgumentKey("t", refresh)
    assert key(((1, 2),), {}) == key(([1, 2],), {})  # a tuple equals a list
    assert key(({1: "a"},), {}) == key(({"1": "a"},), {})  # JSON object keys are strings
    assert key(({"b": 1, "a": 2},), {}) == key(({"a": 2, "b": 1},), {})  # order is irrelevant
    assert len({key((1,), {}), key((1.0,), {}), key((True,), {})}) == 3  # 1, 1.0 and True differ
    assert key((dt.datetime(2026, 1, 1),), {}) != key(("2026-01-01T00:00:00",), {})


def test_digest_has_a_fixed_length_and_no_raw_data():
    key = ArgumentKey("t", refresh)
    big = key(("x" * 1_000_000,), {})
    assert len(big) == len(key(("secret-account",), {})) == 32
    assert "secret" not in key(("secret-account",), {})


def test_lock_key_names_select_the_deciding_parameters():
    def sync(account_id, payload):
        pass

    key = ArgumentKey("t", sync, ("account_id",))
    assert key((1, "a"), {}) == key((1,), {"payload": "b"})
    assert key((1, "a"), {}) != key((2, "a"), {})


def test_lock_key_naming_a_missing_parameter_is_refused():
    with pytest.raises(ConfigurationError, match="'acount_id', which is not a parameter"):
        ArgumentKey("t", refresh, ("acount_id",))


def test_lock_key_callable_receives_the_call():
    key = ArgumentKey("t", refresh, lambda account_id, full=False: f"acct-{account_id}")
    assert key((1,), {"full": True}) == key((), {"account_id": 1})
    assert key((1,), {}) != key((2,), {})


def test_unencodable_argument_names_task_and_parameter():
    key = ArgumentKey("proj.refresh", refresh)
    with pytest.raises(UnencodableArgumentError) as info:
        key((object(),), {})
    assert isinstance(info.value, TypeError)
    assert info.value.parameter == "account_id"
    assert "proj.refresh" in str(info.value) and "account_id" in str(info.value)


def test_star_args_and_kwargs_bind():
    def f(a, *rest, b=1, **extra):
        pass

    key = ArgumentKey("t", f)
    assert key((1, 2, 3), {"c": 4}) == key((1, 2, 3), {"b": 1, "c": 4})
    assert key((1, 2), {}) != key((1, 3), {})


_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(), st.binary(max_size=20),
)
_tagged = st.one_of(
    st.datetimes(), st.dates(), st.times(), st.uuids(), st.decimals(allow_nan=False, allow_infinity=False),
)


def _values(leaves):
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4), st.tuples(children, children),
            st.dictionaries(st.text(max_size=8), children, max_size=4),
        ),
        max_leaves=12,
    )


def _worker_sees(args, kwargs, serializer):
    content_type, encoding, data = dumps((args, kwargs, {}), serializer)
    loaded_args, loaded_kwargs, _ = loads(data, content_type, encoding, accept=[content_type])
    return loaded_args, loaded_kwargs


def task(a, b=None, c="default"):
    pass


KEY = ArgumentKey("proj.task", task)


@settings(max_examples=150, deadline=None)
@given(a=_values(st.one_of(_scalars, _tagged)), b=_values(st.one_of(_scalars, _tagged)))
@pytest.mark.parametrize("serializer", ["json", "pickle"])
def test_publisher_and_worker_keys_agree(serializer, a, b):
    args, kwargs = (a,), {"b": b}
    assert KEY(*_worker_sees(args, kwargs, serializer)) == KEY(args, kwargs)


_msgpack_scalars = st.one_of(  # what msgpack can carry: 64-bit integers, no tagged types
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False), st.text(),
    st.binary(max_size=20),
)


@settings(max_examples=150, deadline=None)
@given(a=_values(_msgpack_scalars), b=_values(_msgpack_scalars))
def test_publisher_and_worker_keys_agree_msgpack(a, b):
    args, kwargs = (a,), {"b": b}
    assert KEY(*_worker_sees(args, kwargs, "msgpack")) == KEY(args, kwargs)


def test_large_and_unicode_values_agree():
    args = ("ünïcødé ✓ " * 1000, list(range(10_000)), {"k": decimal.Decimal("1.10"), "u": uuid.UUID(int=7)})
    for serializer in ("json", "pickle"):
        assert KEY(*_worker_sees(args, {}, serializer)) == KEY(args, {})
