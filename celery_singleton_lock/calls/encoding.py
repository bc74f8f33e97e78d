"""The canonical text of argument values, and the digest that names it.

Plain JSON values are written as compact, key-sorted JSON, so types that JSON
keeps apart stay apart (``1``, ``1.0`` and ``True`` differ) and a tuple equals
a list. Types that the message serializers carry as tagged values (datetimes,
dates, times, UUIDs, decimals, bytes) are written as tokens that JSON itself
never produces (``!datetime"2020-01-01T00:00:00"``), and so are sets, which
pickle and YAML carry (``!set[...]``, their elements' texts sorted): no dict,
string or list can share a text with them, so the encoding is injective. The writer keeps its
own stack instead of recursing, so any nesting the serializer can carry can be
keyed.

The digest has a fixed length whatever the arguments, and no raw user data
reaches a Redis key name.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import enum
import hashlib
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Callable, Collection, Dict, Iterable, Iterator, List, Optional, Tuple

__all__ = ["canonical_json", "canonical_arguments", "key_values_text", "delivered_unchanged", "digest", "is_digest"]

_SCALAR_TYPES = frozenset((str, int, float, bool, type(None)))
_STR_TYPE = frozenset((str,))
_QUOTE: Callable[[str], str] = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _one_shot_dumps() -> Callable[[Any], str]:
    """Compact, key-sorted JSON of a value with no container inside itself.

    Calls json's C encoder directly: ``JSONEncoder.encode`` builds a new one on every call,
    which costs more than writing a small argument.
    """
    encoder = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=True)
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator (PyPy, say)
        return encoder.encode
    chunks = make(None, encoder.default, _QUOTE, None, ":", ",", True, False, True)
    return lambda value: "".join(chunks(value, 0))


_DUMPS = _one_shot_dumps()
_DIGEST = re.compile(r"[0-9a-f]{32}")


def digest(text: str) -> str:
    """A fixed-length hex name for ``text`` (128-bit BLAKE2b: short, fast, collision-safe)."""
    try:
        data = text.encode("utf-8")
    except UnicodeEncodeError:
        # Lone surrogates: a JSON round trip joins each high-low pair into one character,
        # which is what the worker receives; the digest names that text.
        data = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass").encode(
            "utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def is_digest(value: Any) -> bool:
    """Whether ``value`` has the form :func:`digest` gives (as read back from a message header)."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


def canonical_json(value: Any, *, where: str = "argument") -> str:
    """The canonical text of ``value``: compact, key-sorted JSON for plain values, with tagged types
    written as tokens JSON lacks; raises ``TypeError``/``ValueError`` naming ``where`` when there is none."""
    kind = type(value)
    if kind in _SCALAR_TYPES:
        return _DUMPS(value)
    return _write(value, where)


def canonical_arguments(values: Mapping[str, Any]) -> str:
    """The canonical text of a call's bound arguments (parameter name to value): what
    :func:`canonical_json` gives, in one C call when every value is a scalar."""
    if _SCALAR_TYPES.issuperset(map(type, values.values())):
        return _DUMPS(values)
    return _write(values, "arguments")


def key_values_text(values: Iterable[Any]) -> str:
    """The canonical text of a lock's key values, in order: what names one key of a lock name,
    whether a task's call or a shared lock's block gives the values (their parameter names are
    not part of it)."""
    listed = list(values)
    if _SCALAR_TYPES.issuperset(map(type, listed)):
        return _DUMPS(listed)  # the common key: scalars, in one C call
    return _write(listed, "key value")


def delivered_unchanged(values: Collection[Any]) -> bool:
    """Whether every serializer delivers each of ``values`` as it is, up to its canonical text."""
    return _SCALAR_TYPES.issuperset(map(type, values)) or all(map(_kept, values))


def _float_text(value: float) -> str:
    # As json writes a float (allow_nan): repr, or the three names JSON uses for non-finite ones.
    if value != value:
        return "NaN"
    if value == float("inf"):
        return "Infinity"
    if value == float("-inf"):
        return "-Infinity"
    return float.__repr__(value)


_SCALAR_TEXT: Dict[type, Callable[[Any], str]] = {
    str: _QUOTE,
    int: int.__repr__,
    float: _float_text,
    bool: lambda value: "true" if value else "false",
    type(None): lambda value: "null",
}


def _dict_key(key: Any, where: str) -> str:
    # JSON object keys are strings: this is what json.dumps makes of each scalar key.
    if isinstance(key, str):
        return str.__str__(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _float_text(float.__float__(key))
    raise TypeError(f"{where}: dict key {key!r} of type {type(key).__name__} has no JSON form")


def _tag(name: str, text: str) -> str:
    # "!" never starts a JSON value, and outside strings JSON text has no "!": a tagged value
    # cannot be mistaken for any plain value, nor a plain value for it.
    return f"!{name}{_QUOTE(text)}"


def _leaf(value: Any, where: str) -> Tuple[Optional[str], Any]:  # noqa: C901 - one flat dispatch on type
    """A value of no plain JSON type: ``(its text, None)`` for a tagged type, else ``(None, the plain
    JSON value the serializer delivers for it)`` (subclasses of str, int, float, list, tuple, dict)."""
    if isinstance(value, enum.Enum) and isinstance(value.value, (str, int, float)):
        value = value.value
        if type(value) in _SCALAR_TYPES:
            return None, value
    if isinstance(value, bool):
        return None, bool(value)
    if isinstance(value, str):
        return None, str.__str__(value)
    if isinstance(value, int):
        return None, int.__int__(value)
    if isinstance(value, float):
        return None, float.__float__(value)
    if isinstance(value, (list, tuple)):
        return None, list(value)
    if isinstance(value, Mapping):
        return None, dict(value.items())
    if isinstance(value, dt.datetime):
        return _tag("datetime", value.isoformat()), None
    if isinstance(value, dt.date):
        return _tag("date", value.isoformat()), None
    if isinstance(value, dt.time):
        return _tag("time", value.isoformat()), None
    if isinstance(value, uuid.UUID):
        return _tag("uuid", str(value)), None
    if isinstance(value, decimal.Decimal):
        return _tag("decimal", str(value)), None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _tag("bytes", base64.b64encode(bytes(value)).decode("ascii")), None
    if isinstance(value, (set, frozenset)):
        return _set_text(value, where), None
    raise TypeError(f"{where}: a value of type {type(value).__name__} has no canonical JSON form")


def _set_text(value: Collection[Any], where: str) -> str:
    """A set has no order: its elements' texts, sorted, make it one text whatever the iteration order.

    ``!set[...]`` is no JSON and no other tag; each element's text is self-delimiting, so the list
    reads back one way only. A set and a frozenset of the same elements are equal in Python, and
    are one value here. Elements are hashable, so a set cannot hold itself: the recursion is as
    deep as frozensets nest.
    """
    return "!set[" + ",".join(sorted(canonical_json(item, where=where) for item in value)) + "]"


def _flat(value: Any) -> bool:
    """Whether ``value`` is a scalar or a container of scalars, with string keys: plain JSON of
    depth one at most, which json's C encoder writes exactly as :func:`_write` would."""
    kind = type(value)
    if kind in _SCALAR_TYPES:
        return True
    if kind is list or kind is tuple:
        return _SCALAR_TYPES.issuperset(map(type, value))
    if kind is dict:
        return _STR_TYPE.issuperset(map(type, value)) and _SCALAR_TYPES.issuperset(map(type, value.values()))
    return False


def _kept(value: Any) -> bool:
    """Whether every serializer delivers ``value`` as it is, up to its canonical text: a scalar,
    or a list or tuple of scalars. (Not a dict: JSON turns some into tagged values.)"""
    kind = type(value)
    return kind in _SCALAR_TYPES or ((kind is list or kind is tuple) and _SCALAR_TYPES.issuperset(map(type, value)))


def _write(value: Any, where: str) -> str:  # noqa: C901 - one loop over an explicit stack
    """The canonical text of any value, depth-first with an explicit stack (no recursion limit).

    The current container's state lives in locals; entering a container pushes its parent's
    state on ``outer``, and the parent's iterator resumes where it stopped when it is done.
    """
    parts: List[str] = []
    out = parts.append
    outer: List[Tuple[Iterator[Any], bool, str, int]] = []
    open_ids: set = set()  # the containers being written, to refuse one that holds itself
    # The current container: its remaining items, whether they are (key, value) pairs, its
    # closing bracket and id; at the start, a pseudo-container holding just ``value``.
    items: Iterator[Any] = iter((value,))
    keyed, close, ident = False, "", 0
    sep = ""  # what precedes the next item: nothing for the first one, a comma after
    while True:
        for item in items:
            if keyed:
                key, item = item
                out(f"{sep}{_QUOTE(key)}:")
            elif sep:
                out(sep)
            sep = ","
            kind = type(item)
            if kind in _SCALAR_TYPES:
                out(_SCALAR_TEXT[kind](item))
                continue
            container = item
            if kind is not dict and kind is not list and kind is not tuple:
                text, item = _leaf(item, where)
                if text is not None:
                    out(text)
                    continue
                kind = type(item)
                if kind in _SCALAR_TYPES:
                    out(_SCALAR_TEXT[kind](item))
                    continue
            if kind is dict:
                if _STR_TYPE.issuperset(map(type, item)) and all(map(_flat, item.values())):
                    out(_DUMPS(item))  # scalars and all-scalar containers: json writes it in one C call
                    continue
                # Keys as JSON writes them; a later key that writes the same wins, as in a JSON decoder.
                inner: Iterator[Any] = iter(sorted({_dict_key(k, where): v for k, v in item.items()}.items()))
                inner_keyed, inner_close = True, "}"
                out("{")
            else:
                if _SCALAR_TYPES.issuperset(map(type, item)) or all(map(_flat, item)):
                    out(_DUMPS(item))  # the common big argument: one C call
                    continue
                inner, inner_keyed, inner_close = iter(item), False, "]"
                out("[")
            if id(container) in open_ids:
                raise ValueError(f"{where}: a container holds itself (circular reference)")
            outer.append((items, keyed, close, ident))
            items, keyed, close, ident = inner, inner_keyed, inner_close, id(container)
            open_ids.add(ident)
            sep = ""
            break
        else:  # the current container is done
            out(close)
            open_ids.discard(ident)
            if not outer:
                return "".join(parts)
            items, keyed, close, ident = outer.pop()
            sep = ","
