"""The publisher and the worker derive one key for one call, whatever serializer carries it.

The worker keys the arguments it received, after the message's round trip through kombu; the
publisher keys the arguments it was given. A search over nested values, tagged types included,
holds the two to one digest for JSON, pickle and msgpack.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support.round_trip import KEY, worker_sees


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


@settings(max_examples=150, deadline=None)
@given(a=_values(st.one_of(_scalars, _tagged)), b=_values(st.one_of(_scalars, _tagged)))
@pytest.mark.parametrize("serializer", ["json", "pickle"])
def test_publisher_and_worker_keys_agree(serializer, a, b):
    args, kwargs = (a,), {"b": b}
    assert KEY(*worker_sees(args, kwargs, serializer)) == KEY(args, kwargs)


_msgpack_scalars = st.one_of(  # what msgpack can carry: 64-bit integers, no tagged types
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.floats(allow_nan=False), st.text(),
    st.binary(max_size=20),
)


@settings(max_examples=150, deadline=None)
@given(a=_values(_msgpack_scalars), b=_values(_msgpack_scalars))
def test_publisher_and_worker_keys_agree_msgpack(a, b):
    args, kwargs = (a,), {"b": b}
    assert KEY(*worker_sees(args, kwargs, "msgpack")) == KEY(args, kwargs)
