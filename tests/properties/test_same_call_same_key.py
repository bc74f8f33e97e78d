"""Two calls share a key exactly when they are the same call (a property, searched by hypothesis).

The contract (docs/singleton-locks.md, "What makes two calls the same"): arguments are compared as the
worker receives them, after the JSON round trip, by type and exact text. A tuple equals
a list and dict keys become strings; ``1``, ``1.0`` and ``True`` differ; a datetime,
date, time, UUID, Decimal or bytes value keeps its type and is compared by its exact
text (``Decimal("2.5")`` differs from ``Decimal("2.50")``), never equal to a string or
a dict; a dict shaped like kombu's tagged JSON is the value it stands for, because that
is what the worker receives. The search mixes values with their look-alikes: the
strings, dicts and other types that an encoding could confuse them with.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import itertools
import uuid

from hypothesis import given, reject, settings
from hypothesis import strategies as st
from kombu.exceptions import DecodeError
from kombu.serialization import dumps, loads

from celery_singleton_lock.calls.arguments import ArgumentKey


def task(a, b=None):
    pass


KEY = ArgumentKey("proj.task", task)


def _json_round_trip(args, kwargs):
    content_type, encoding, body = dumps((list(args), dict(kwargs)), serializer="json")
    return loads(body, content_type, encoding)


def _identity(value):
    """What the contract compares: the type and exact text of every part (after the round trip)."""
    kind = type(value)
    if kind in (list, tuple):
        return ("list", tuple(_identity(item) for item in value))
    if kind is dict:
        return ("dict", tuple(sorted((key, _identity(item)) for key, item in value.items())))
    if kind is float:
        return ("float", repr(value))  # -0.0 differs from 0.0; every NaN is one value
    if kind is bytes:
        return ("bytes", value)
    if kind in (str, int, bool, type(None)):
        return (kind.__name__, value)
    return (kind.__name__, value.isoformat() if hasattr(value, "isoformat") else str(value))


def _same_call(a, b) -> bool:
    return _identity(_json_round_trip((a,), {})) == _identity(_json_round_trip((b,), {}))


WHEN = dt.datetime(2020, 1, 1)
_POOL = [
    0, 1, -1, 0.0, -0.0, 1.0, 2.5, True, False, None, float("nan"), float("inf"),
    "", "1", "1.0", "true", "null", "2.5", "hi", "aGk=", "NaN", "Infinity", "\U0001f600",
    "2020-01-01T00:00:00", "2020-01-01", "12:30:00", str(uuid.UUID(int=1)), '!datetime"2020-01-01T00:00:00"',
    WHEN, WHEN.date(), dt.time(12, 30), decimal.Decimal("2.5"), decimal.Decimal("2.50"), uuid.UUID(int=1),
    b"hi", b"\xff",
    {"$datetime": "2020-01-01T00:00:00"}, {"$date": "2020-01-01"}, {"$time": "12:30:00"},
    {"$decimal": "2.5"}, {"$uuid": str(uuid.UUID(int=1))}, {"$bytes": "aGk="},
    {"__type__": "datetime", "__value__": "2020-01-01T00:00:00"}, {"__type__": "decimal", "__value__": "2.5"},
    {"__type__": "bytes", "__value__": "hi"}, {"__type__": "base64", "__value__": "aGk="},
    {"__type__": "uuid", "__value__": {"hex": uuid.UUID(int=1).hex}}, {"__type__": "datetime"},
]
_OFFSETS = st.sampled_from([None, dt.timezone.utc, dt.timezone(dt.timedelta(hours=5, minutes=30))])
_leaves = st.one_of(
    st.sampled_from(_POOL),
    st.integers(), st.floats(), st.text(max_size=4), st.binary(max_size=4),
    st.datetimes(timezones=_OFFSETS), st.dates(), st.times(), st.decimals(), st.uuids(),
)
_keys = st.one_of(st.sampled_from(["", "1", "true", "null", "k", "$datetime", "__type__", "__value__", "$$k",
                                   1, True, None, 1.5]), st.text(max_size=3))
_values = st.recursive(
    _leaves,
    lambda children: st.one_of(st.lists(children, max_size=3), st.tuples(children),
                               st.dictionaries(_keys, children, max_size=3)),
    max_leaves=8,
)


def _kombu_tag(kind: str, value):
    return {"__type__": kind, "__value__": value}


def _twin(value):
    """The same call written otherwise: tuples and lists swapped, dicts reordered, tagged values
    spelled as the tagged dicts kombu's JSON decodes into them."""
    if isinstance(value, dict):
        return {key: _twin(item) for key, item in reversed(list(value.items()))}
    if isinstance(value, list):
        return tuple(_twin(item) for item in value)
    if isinstance(value, tuple):
        return [_twin(item) for item in value]
    if isinstance(value, dt.datetime):
        return _kombu_tag("datetime", value.isoformat())
    if isinstance(value, (dt.date, dt.time)):
        return _kombu_tag(type(value).__name__, value.isoformat())
    if isinstance(value, decimal.Decimal):
        return _kombu_tag("decimal", str(value))
    if isinstance(value, uuid.UUID):
        return _kombu_tag("uuid", {"hex": value.hex})
    if isinstance(value, bytes):
        return _kombu_tag("base64", base64.b64encode(value).decode())
    return value


def _look_alike(value):
    """A different call that an encoding could confuse with ``value``."""
    if isinstance(value, (list, tuple)):
        return [_look_alike(item) for item in value]
    if isinstance(value, dict):
        return {key: _look_alike(item) for key, item in value.items()}
    if isinstance(value, (dt.date, dt.time)):
        return {f"${type(value).__name__}": value.isoformat()}
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return {f"${type(value).__name__.lower()}": str(value)}
    if isinstance(value, bytes):
        return {"$bytes": base64.b64encode(value).decode()}
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value)
    return value


def _delivers(value) -> bool:
    """Whether a worker can decode a message carrying ``value`` (a dict shaped like a tagged value of
    no known type cannot be: the publisher refuses such a call, see test_arguments)."""
    try:
        _json_round_trip((value,), {})
    except DecodeError:
        return False
    return True


def _variants(drawn):
    """Each drawn value, the same call written otherwise, and a look-alike; those a worker can receive."""
    variants = (variant for value in drawn for variant in (value, _twin(value), _look_alike(value)))
    return [variant for variant in variants if _delivers(variant)]


@given(st.lists(_values, min_size=1, max_size=4))
def test_two_calls_share_a_key_exactly_when_they_are_the_same_call(drawn):
    calls = _variants(drawn)
    keys = [KEY(*_json_round_trip((value,), {})) for value in calls]  # as the worker derives them
    for (a, key_a), (b, key_b) in itertools.combinations(zip(calls, keys), 2):
        assert (key_a == key_b) == _same_call(a, b), (a, b)


@given(st.lists(_values, min_size=1, max_size=2))
def test_the_publisher_derives_the_key_the_worker_will(drawn):
    for value in _variants(drawn):
        for args, kwargs in (((value,), {}), ((), {"a": [value], "b": value})):
            assert KEY.for_message(args, kwargs, _json_round_trip) == KEY(*_json_round_trip(args, kwargs)), value


@settings(max_examples=200)
@given(_values, _values)
def test_keys_are_the_workers_whatever_the_spelling(a, b):
    # A message kombu cannot decode (a type marker whose tag is not text) never reaches a worker.
    try:
        _json_round_trip((a, b), {"a": a, "b": b})
    except DecodeError:
        reject()
    # The worker's key of each call, with the argument passed by position or by keyword.
    by_position = KEY(*_json_round_trip((a, b), {}))
    assert by_position == KEY(*_json_round_trip((a,), {"b": b})) == KEY(*_json_round_trip((), {"a": a, "b": b}))
    assert (by_position == KEY(*_json_round_trip((a,), {}))) == _same_call(b, None)
