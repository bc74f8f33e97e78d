"""Key derivation: signature binding, canonical encoding, digest (pure functions, no Redis)."""

from __future__ import annotations

import datetime as dt
import decimal
import uuid

import pytest

from kombu.serialization import dumps

from celery_singleton_lock import ConfigurationError, UnencodableArgumentError
from celery_singleton_lock.calls.arguments import ArgumentKey, digest, key_values_text
from tests.support.round_trip import KEY, worker_sees


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


def test_large_and_unicode_values_agree():
    args = ("ünïcødé ✓ " * 1000, list(range(10_000)), {"k": decimal.Decimal("1.10"), "u": uuid.UUID(int=7)})
    for serializer in ("json", "pickle"):
        assert KEY(*worker_sees(args, {}, serializer)) == KEY(args, {})


# -- one lock per call: the encoding is injective ----------------------------------------------
@pytest.mark.parametrize("tagged, lookalike", [
    (dt.datetime(2020, 1, 1), {"$datetime": "2020-01-01T00:00:00"}),
    (dt.date(2020, 1, 1), {"$date": "2020-01-01"}),
    (dt.time(12, 30), {"$time": "12:30:00"}),
    (decimal.Decimal("2.5"), {"$decimal": "2.5"}),
    (uuid.UUID(int=1), {"$uuid": "00000000-0000-0000-0000-000000000001"}),
    (b"hi", {"$bytes": "aGk="}),
])
def test_a_tagged_value_never_shares_a_key_with_a_dict_or_a_string(tagged, lookalike):
    (text,) = lookalike.values()
    keys = {KEY((tagged,), {}), KEY((lookalike,), {}), KEY((text,), {}), KEY(([tagged],), {}),
            KEY(([lookalike],), {}), KEY(({"k": tagged},), {}), KEY(({"k": lookalike},), {})}
    assert len(keys) == 7


def test_tagged_values_keep_their_exact_text():
    assert KEY((decimal.Decimal("2.5"),), {}) != KEY((decimal.Decimal("2.50"),), {})
    assert KEY((dt.datetime(2020, 1, 1),), {}) != KEY((dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc),), {})
    assert KEY((dt.datetime(2020, 1, 1),), {}) != KEY((dt.date(2020, 1, 1),), {})
    assert KEY((b"hi",), {}) == KEY((bytearray(b"hi"),), {}) != KEY(("hi",), {})


def test_plain_values_keep_the_keys_they_always_had():
    # Publishers and workers of one key format agree on every call made of plain JSON values; the
    # format is the key values in order, without parameter names (see the CHANGELOG for the change).
    job = ArgumentKey("proj.job", lambda a, b=None, c="x": None)
    assert ArgumentKey("proj.refresh", refresh)((1,), {}) == "074ea9dc11cfb5191e55ba4ca3a975d3"
    assert ArgumentKey("proj.refresh", refresh)(("acct-1",), {"full": True}) == "c556f5d70cdf8e585a215eae8696fee2"
    assert job(({"a": [1, 2.5], "b": {"c": None}, "é": "ü"},), {"b": (1, "2")}) == "7595d151279e6f8e41e6f1f462b7deb9"
    assert job(([[["deep"]], {"1": True}],), {}) == "ec371c6579e0e939b4f794fa2a3deac1"


def test_a_key_is_its_values_in_order_and_not_their_parameter_names():
    def by_account(account_id, full=False):
        pass

    def by_id(id, reason=""):
        pass

    first = ArgumentKey("proj.sync", by_account, ("account_id",))
    second = ArgumentKey("proj.delete", by_id, ("id",))
    function = ArgumentKey("proj.audit", by_id, lambda id, reason="": str(id))
    assert first((42,), {}) == second((), {"id": 42}) == digest(key_values_text([42]))
    assert function((42,), {}) == digest(key_values_text(["42"])) != first((42,), {})
    assert ArgumentKey("proj.pair", lambda a, b: None)((1, 2), {}) != ArgumentKey("proj.pair", lambda a, b: None)((2, 1), {})
    every = ArgumentKey("proj.every", by_account)
    assert every((), {"full": True, "account_id": 7}) == every((7, True), {}) == digest(key_values_text([7, True]))
    assert (first.arity, function.arity, every.arity) == (1, 1, 2)


# -- any depth the serializer carries --------------------------------------------------------
def _nested(depth, leaf=1, container=list):
    value = leaf
    for _ in range(depth):
        value = container([value]) if container is not dict else {"k": value}
    return value


def test_nesting_deeper_than_the_recursion_limit_is_keyed():
    for depth in (900, 5_000):
        assert KEY((_nested(depth),), {}) == KEY((_nested(depth, container=tuple),), {})
        assert KEY((_nested(depth),), {}) != KEY((_nested(depth + 1),), {})
        assert KEY((_nested(depth, container=dict),), {}) != KEY((_nested(depth, leaf=2, container=dict),), {})
        assert KEY((_nested(depth, leaf=dt.date(2020, 1, 1)),), {})


def test_the_deepest_call_json_carries_is_keyed_by_publisher_and_worker():
    depth = 100
    while True:  # the deepest nesting kombu's JSON encodes here
        try:
            dumps(_nested(depth * 2), "json")
        except Exception:
            break
        depth *= 2
    low, high = depth, depth * 2
    while high - low > 1:
        middle = (low + high) // 2
        try:
            dumps(_nested(middle), "json")
            low = middle
        except Exception:
            high = middle
    args = (_nested(low - 50, leaf={"k": [dt.datetime(2020, 1, 1)]}),)
    assert KEY(*worker_sees(args, {}, "json")) == KEY.for_message(args, {}, _json_round_trip)


def test_a_container_that_holds_itself_is_refused_naming_the_parameter():
    loop = [1]
    loop.append({"again": loop})
    with pytest.raises(UnencodableArgumentError) as info:
        KEY((loop,), {})
    assert info.value.parameter == "a" and "circular" in str(info.value)
    shared = [1, 2]
    assert KEY(([shared, shared],), {}) == KEY(([[1, 2], [1, 2]],), {})  # shared, not circular


# -- the publisher keys a call as the worker will receive it --------------------------------
def _json_round_trip(args, kwargs):
    return worker_sees(tuple(args), dict(kwargs), "json")


def test_a_dict_json_delivers_as_a_tagged_value_is_keyed_as_that_value():
    tagged = {"__type__": "datetime", "__value__": "2023-01-01T00:00:00"}
    worker_args, worker_kwargs = worker_sees((tagged,), {"b": [tagged]}, "json")
    assert worker_args == [dt.datetime(2023, 1, 1)]  # what the body receives

    published = KEY.for_message((tagged,), {"b": [tagged]}, _json_round_trip)
    assert published == KEY(worker_args, worker_kwargs)
    assert published == KEY.for_message((dt.datetime(2023, 1, 1),), {"b": [dt.datetime(2023, 1, 1)]},
                                        _json_round_trip)


def test_scalar_arguments_skip_the_round_trip():
    def refuse(args, kwargs):
        raise AssertionError("plain scalars and flat lists are delivered unchanged")

    assert KEY.for_message((1, "x"), {"c": [1.5, None, True]}, refuse) == KEY((1, "x"), {"c": [1.5, None, True]})
    sync = ArgumentKey("proj.sync", lambda account_id, payload: None, ("account_id",))
    assert sync.for_message((7,), {"payload": {"big": ["dict"]}}, refuse) == sync((7,), {"payload": None})


def test_lone_surrogates_are_keyed_as_the_worker_receives_them():
    pair = "\ud83d\ude00"  # two lone surrogates: a JSON round trip joins them into one character
    for args in ((pair,), ([pair, "x"],), ({pair: 1},)):
        assert KEY(args, {}) == KEY(*worker_sees(args, {}, "json"))
    assert KEY((pair,), {}) == KEY(("\U0001f600",), {})
    assert KEY(("\ud83d",), {}) != KEY(("\ude00",), {})


def test_a_call_no_worker_could_decode_is_refused_before_publishing():
    from types import SimpleNamespace

    from celery_singleton_lock.enqueue.publish import message_digest

    task = SimpleNamespace(name="proj.task")
    with pytest.raises(UnencodableArgumentError, match="proj.task.*could not decode"):
        message_digest(task, KEY, ({"__type__": "no-such-type", "__value__": 1},), {}, "json")
    with pytest.raises(UnencodableArgumentError) as info:  # no form at all: the parameter is named
        message_digest(task, KEY, (object(),), {}, "json")
    assert info.value.parameter == "a"
