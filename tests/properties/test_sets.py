"""Sets, which pickle and YAML carry, have one key per value whatever their iteration order.

A set is compared by its elements, each as the contract compares values (type and exact text):
two sets share a key exactly when they hold the same elements; a set and a frozenset of the
same elements are one value, as in Python; a set never shares a key with a list, a tuple or a
string, whatever they hold. The publisher derives the key the worker will under pickle.
"""

from __future__ import annotations

import itertools
import pickle

from hypothesis import given
from hypothesis import strategies as st

from celery_singleton_lock.calls.arguments import canonical_json
from tests.support.round_trip import KEY, worker_sees

# Hashable leaves whose Python equality is the contract's sameness (no 1 == 1.0 == True here).
_leaves = st.one_of(st.integers(), st.text(max_size=4), st.binary(max_size=3), st.dates(), st.uuids())
_elements = st.recursive(_leaves, lambda inner: st.one_of(st.tuples(inner, inner), st.frozensets(inner, max_size=3)),
                         max_leaves=6)
_sets = st.one_of(st.sets(_elements, max_size=5), st.frozensets(_elements, max_size=5))


def _reordered(value):
    """The same set built in another insertion order (so iterated otherwise, for strings at least)."""
    return type(value)(reversed(list(value)))


def _look_alikes(value):
    """Values an encoding of a set could be confused with."""
    items = sorted(value, key=repr)
    return [items, tuple(items), canonical_json(value), f"!set{canonical_json(items)}", {"set": items}]


@given(st.lists(_sets, min_size=1, max_size=4))
def test_two_sets_share_a_key_exactly_when_they_are_equal(drawn):
    calls = [variant for value in drawn for variant in (value, _reordered(value), pickle.loads(pickle.dumps(value)))]
    keys = [KEY((value,), {}) for value in calls]
    for (a, key_a), (b, key_b) in itertools.combinations(zip(calls, keys), 2):
        assert (key_a == key_b) == (set(a) == set(b)), (a, b)


@given(_sets)
def test_a_set_never_shares_a_key_with_a_look_alike(value):
    key = KEY((value,), {})
    for other in _look_alikes(value):
        assert KEY((other,), {}) != key, other


@given(a=_sets, b=_sets)
def test_the_publisher_derives_the_key_the_worker_will_under_pickle(a, b):
    args, kwargs = (a,), {"b": b}
    assert KEY(*worker_sees(args, kwargs, "pickle")) == KEY(args, kwargs)
