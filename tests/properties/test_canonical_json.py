"""The fast paths of key derivation give the very text the general path gives.

Publishers and workers of different versions must compute one digest for one
call, so an optimization of ``canonical_json`` may never change its output.
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from celery_singleton_lock.calls.arguments import canonical_json


def _reference(value):
    """The general path, written out plainly: tuples are lists, dict keys are JSON key strings."""
    if isinstance(value, (list, tuple)):
        return [_reference(v) for v in value]
    if isinstance(value, dict):
        return {json.dumps(k) if not isinstance(k, str) else k: _reference(v) for k, v in value.items()}
    return value


_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text())
_keys = st.one_of(st.text(), st.integers(), st.booleans(), st.none())
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.tuples(inner, inner),
                            st.dictionaries(_keys, inner, max_size=5)),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_canonical_json_equals_the_general_path(value):
    expected = json.dumps(_reference(value), ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    assert canonical_json(value) == expected


def test_scalar_containers_and_mixed_ones_agree():
    assert canonical_json((1, "a", None)) == canonical_json([1, "a", None]) == '[1,"a",null]'
    assert canonical_json({"b": 1, "a": (2,)}) == '{"a":[2],"b":1}'
    assert canonical_json({1: "x", "2": 2.0}) == '{"1":"x","2":2.0}'
