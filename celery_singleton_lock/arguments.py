"""Turn a task call into the digest that names its lock.

Two calls are "the same" when their arguments, bound to the task's signature
(defaults applied), are equal after the message serializer's round trip: that
is what the worker's body receives. The publisher sees the caller's Python
objects, so it derives the key from the arguments as the serializer gives them
back (:meth:`ArgumentKey.for_message`); plain scalars, which every serializer
delivers unchanged, skip that round trip.

Both sides then reduce the arguments to one canonical text before hashing it.
Plain JSON values are written as compact, key-sorted JSON, so types that JSON
keeps apart stay apart (``1``, ``1.0`` and ``True`` differ) and a tuple equals
a list. Types that the message serializers carry as tagged values (datetimes,
dates, times, UUIDs, decimals, bytes) are written as tokens that JSON itself
never produces (``!datetime"2020-01-01T00:00:00"``): no dict, string or list
can share a text with them, so the encoding is injective. The writer keeps its
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
import inspect
import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from .exceptions import ConfigurationError, UnencodableArgumentError

__all__ = ["ArgumentKey", "LockKeySpec", "Deliver", "canonical_json", "digest", "is_digest"]

#: What ``lock_key`` may be: every argument, some parameter names, or a function of the call.
LockKeySpec = Union[None, Tuple[str, ...], Callable[..., str]]

#: ``deliver(args, kwargs)``: the arguments as the worker's body will receive them.
Deliver = Callable[[Sequence[Any], Mapping[str, Any]], Tuple[Sequence[Any], Mapping[str, Any]]]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
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
    raise TypeError(f"{where}: a value of type {type(value).__name__} has no canonical JSON form")


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


class ArgumentKey:
    """Derives the lock digest of one task's calls.

    Built once per task (binding to the signature is prepared up front), then
    called on the hot path of every publish and every execution.
    """

    __slots__ = ("task_name", "_spec", "_signature", "_names", "_defaults", "_fast", "_selected")

    def __init__(self, task_name: str, func: Callable[..., Any], spec: LockKeySpec = None) -> None:
        self.task_name = task_name
        self._spec = spec
        try:
            self._signature: Optional[inspect.Signature] = inspect.signature(func)
        except (TypeError, ValueError):  # builtins without a signature: key on the raw call
            self._signature = None
        params = list(self._signature.parameters.values()) if self._signature else []
        self._names: Tuple[str, ...] = tuple(p.name for p in params)
        self._defaults: Dict[str, Any] = {
            p.name: p.default for p in params if p.default is not inspect.Parameter.empty
        }
        # The fast binder handles plain parameters; *args, **kwargs and positional-only
        # parameters go through inspect's full binder.
        self._fast = self._signature is not None and all(
            p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY) for p in params
        ) and all(p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD for p in params[: self._positional_count(params)])
        self._selected: Optional[Tuple[str, ...]] = self._validate_spec(spec, params)

    @staticmethod
    def _positional_count(params: Sequence[inspect.Parameter]) -> int:
        return sum(1 for p in params if p.kind in _POSITIONAL)

    def _validate_spec(self, spec: LockKeySpec, params: Sequence[inspect.Parameter]) -> Optional[Tuple[str, ...]]:
        if spec is None or callable(spec):
            return None
        if isinstance(spec, str) or not isinstance(spec, (tuple, list)):
            raise ConfigurationError(
                f"task {self.task_name!r}: lock_key must be None, a tuple of parameter names or a callable, "
                f"not {spec!r}",
                task=self.task_name,
            )
        names = tuple(spec)
        accepts_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
        for name in names:
            if not isinstance(name, str):
                raise ConfigurationError(
                    f"task {self.task_name!r}: lock_key entries must be parameter names (str), not {name!r}",
                    task=self.task_name,
                )
            if self._signature is not None and name not in self._names and not accepts_any:
                raise ConfigurationError(
                    f"task {self.task_name!r}: lock_key names {name!r}, which is not a parameter of the task "
                    f"(parameters: {', '.join(self._names) or 'none'})",
                    task=self.task_name,
                )
        return names

    @property
    def takes_function(self) -> bool:
        """Whether ``lock_key`` is a function of the call: it is given the arguments as the body
        receives them, so a publisher must hand it what the message will deliver."""
        return self._spec is not None and self._selected is None

    # -- binding ------------------------------------------------------------------------------
    def bind(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Dict[str, Any]:
        """Map the call onto parameter names, defaults applied, as the body would see it."""
        if self._signature is None:
            return {"args": list(args), "kwargs": dict(kwargs)}
        if self._fast:
            return self._bind_fast(args, kwargs)
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def _bind_fast(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Dict[str, Any]:
        names = self._names
        if len(args) > len(names):
            raise TypeError(f"{self.task_name}() takes {len(names)} arguments but {len(args)} were given")
        values = dict(zip(names, args))
        for name, value in kwargs.items():
            if name in values or name not in names:
                # Let inspect produce the exact message Python would.
                bound = self._signature.bind(*args, **kwargs)  # type: ignore[union-attr]
                return dict(bound.arguments)
            values[name] = value
        if len(values) < len(names):
            for name in names:
                if name not in values:
                    if name not in self._defaults:
                        raise TypeError(f"{self.task_name}() missing required argument: {name!r}")
                    values[name] = self._defaults[name]
        return values

    # -- digest -------------------------------------------------------------------------------
    def __call__(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        """The digest naming this call's lock, from the arguments as the body receives them."""
        if self._spec is not None and self._selected is None:  # a callable
            return digest(self._call_key_function(args, kwargs))
        return digest(self._encode(self._deciding(args, kwargs)))

    def for_message(self, args: Sequence[Any], kwargs: Mapping[str, Any], deliver: Deliver) -> str:
        """The digest the worker will derive from a message carrying this call.

        The worker sees the arguments as the serializer gives them back (a tuple as a list, a
        dict shaped like a tagged value as that value), so the key is derived from
        ``deliver(args, kwargs)``, unless every argument it depends on is one that any serializer
        delivers unchanged: a plain scalar, or a list or tuple of them (the common big argument).
        """
        if self._spec is not None and self._selected is None:
            return digest(self._call_key_function(*deliver(args, kwargs)))
        values = self._deciding(args, kwargs)
        if not (_SCALAR_TYPES.issuperset(map(type, values.values())) or all(map(_kept, values.values()))):
            # Bind what the worker binds: the delivered arguments, then the Python defaults.
            values = self._deciding(*deliver(args, kwargs))
        return digest(self._encode(values))

    def _deciding(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Dict[str, Any]:
        """The bound arguments that decide the lock (those ``lock_key`` names, or all)."""
        values = self.bind(args, kwargs)
        if self._selected is not None:
            return {name: values.get(name) for name in self._selected}
        return values

    def _call_key_function(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        result = self._spec(*args, **kwargs)  # type: ignore[misc,operator]
        if not isinstance(result, str):
            raise UnencodableArgumentError(
                f"task {self.task_name!r}: lock_key function returned {type(result).__name__}, expected str",
                task=self.task_name,
            )
        return result

    def _encode(self, values: Dict[str, Any]) -> str:
        if _SCALAR_TYPES.issuperset(map(type, values.values())):
            return _DUMPS(values)
        try:
            return _write(values, "arguments")
        except (TypeError, ValueError) as exc:
            error: BaseException = exc
            culprit: Optional[str] = None
        for name in sorted(values):  # which one: the error names the parameter
            try:
                canonical_json(values[name], where=name)
            except (TypeError, ValueError) as exc:
                error, culprit = exc, name
                break
        raise UnencodableArgumentError(
            f"task {self.task_name!r}: argument {culprit!r} cannot be used in a lock key ({error}); "
            "pass JSON-like values (str, int, float, bool, None, list, dict, datetime, date, time, "
            "UUID, Decimal, bytes) or set lock_key to choose the parameters that decide the lock",
            task=self.task_name,
            parameter=culprit,
        ) from error
