"""Turn a task call into the digest that names its lock.

Two calls are "the same" when their arguments, bound to the task's signature
(defaults applied), are equal after a JSON round trip. The publisher sees the
caller's Python objects while the worker sees what the serializer gave back
(tuples become lists, dict keys become strings), so both sides reduce the
arguments to one canonical JSON text before hashing it. Types that JSON keeps
apart stay apart (``1``, ``1.0`` and ``True`` differ); types that the message
serializers carry as tagged values (datetimes, UUIDs, decimals, bytes) are
tagged here too, so a datetime is not confused with its ISO string.

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
import uuid
from typing import Any, Callable, Dict, Mapping, Optional, Sequence, Tuple, Union

from .exceptions import ConfigurationError, UnencodableArgumentError

__all__ = ["ArgumentKey", "LockKeySpec", "canonical_json", "digest"]

#: What ``lock_key`` may be: every argument, some parameter names, or a function of the call.
LockKeySpec = Union[None, Tuple[str, ...], Callable[..., str]]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
_SCALAR_TYPES = frozenset((str, int, float, bool, type(None)))
_STR_TYPE = frozenset((str,))
_DUMPS = json.JSONEncoder(ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=True).encode


def digest(text: str) -> str:
    """A fixed-length hex name for ``text`` (128-bit BLAKE2b: short, fast, collision-safe)."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def canonical_json(value: Any, *, where: str = "argument") -> str:
    """The canonical JSON text of ``value``; raises ``TypeError`` naming ``where`` when there is none."""
    return _DUMPS(_canonical(value, where))


def _dict_key(key: Any, where: str) -> str:
    # JSON object keys are strings: this is what json.dumps makes of each scalar key.
    if isinstance(key, str):
        return str(key)
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return str(int(key))
    if isinstance(key, float):
        return repr(float(key))
    raise TypeError(f"{where}: dict key {key!r} of type {type(key).__name__} has no JSON form")


def _canonical(value: Any, where: str) -> Any:  # noqa: C901 - one flat dispatch on type
    kind = type(value)
    if kind in _SCALAR_TYPES:
        return value
    if kind is list or kind is tuple:
        # All-scalar containers (the common big argument) are already canonical: the type
        # check runs in C, and the JSON encoder writes a tuple as the same array as a list.
        if _SCALAR_TYPES.issuperset(map(type, value)):
            return value
        return [_canonical(item, where) for item in value]
    if kind is dict:
        if _STR_TYPE.issuperset(map(type, value)) and _SCALAR_TYPES.issuperset(map(type, value.values())):
            return value
        return {_dict_key(k, where): _canonical(v, where) for k, v in value.items()}
    # Subclasses and tagged types, slower path.
    if isinstance(value, enum.Enum) and isinstance(value.value, (str, int, float)):
        return _canonical(value.value, where)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (list, tuple)):
        return [_canonical(item, where) for item in value]
    if isinstance(value, Mapping):
        return {_dict_key(k, where): _canonical(v, where) for k, v in value.items()}
    if isinstance(value, dt.datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, dt.date):
        return {"$date": value.isoformat()}
    if isinstance(value, dt.time):
        return {"$time": value.isoformat()}
    if isinstance(value, uuid.UUID):
        return {"$uuid": str(value)}
    if isinstance(value, decimal.Decimal):
        return {"$decimal": str(value)}
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"$bytes": base64.b64encode(bytes(value)).decode("ascii")}
    raise TypeError(f"{where}: a value of type {type(value).__name__} has no canonical JSON form")


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
        """The digest naming this call's lock."""
        spec = self._spec
        if spec is not None and self._selected is None:  # a callable
            return digest(self._call_key_function(args, kwargs))
        values = self.bind(args, kwargs)
        if self._selected is not None:
            values = {name: values.get(name) for name in self._selected}
        return digest(self._encode(values))

    def _call_key_function(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        result = self._spec(*args, **kwargs)  # type: ignore[misc,operator]
        if not isinstance(result, str):
            raise UnencodableArgumentError(
                f"task {self.task_name!r}: lock_key function returned {type(result).__name__}, expected str",
                task=self.task_name,
            )
        return result

    def _encode(self, values: Dict[str, Any]) -> str:
        for value in values.values():
            if type(value) not in _SCALAR_TYPES:
                break
        else:
            return _DUMPS(values)
        encoded = {}
        for name, value in values.items():
            try:
                encoded[name] = _canonical(value, name)
            except (TypeError, ValueError, RecursionError) as exc:
                raise UnencodableArgumentError(
                    f"task {self.task_name!r}: argument {name!r} cannot be used in a lock key ({exc}); "
                    "pass JSON-like values (str, int, float, bool, None, list, dict, datetime, date, time, "
                    "UUID, Decimal, bytes) or set lock_key to choose the parameters that decide the lock",
                    task=self.task_name,
                    parameter=name,
                ) from exc
        return _DUMPS(encoded)
