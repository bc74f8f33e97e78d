"""Turn a task call into the digest that names its lock.

Two calls are "the same" when their arguments, bound to the task's signature
(defaults applied), are equal after the message serializer's round trip: that
is what the worker's body receives. The publisher sees the caller's Python
objects, so it derives the key from the arguments as the serializer gives them
back (:meth:`ArgumentKey.for_message`); plain scalars, which every serializer
delivers unchanged, skip that round trip.

Both sides then reduce the bound arguments to one canonical text and hash it
(:mod:`.encoding`, whose ``canonical_json``, ``digest`` and ``is_digest`` this
module exports too).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

from .encoding import canonical_arguments, canonical_json, delivered_unchanged, digest, is_digest, key_values_text
from ..exceptions import ConfigurationError, UnencodableArgumentError

__all__ = ["ArgumentKey", "LockKeySpec", "Deliver", "check_call_shape", "canonical_json", "digest", "is_digest",
           "key_values_text"]

#: What ``lock_key`` may be: every argument, some parameter names, or a function of the call.
LockKeySpec = Union[None, Tuple[str, ...], Callable[..., str]]

#: ``deliver(args, kwargs)``: the arguments as the worker's body will receive them.
Deliver = Callable[[Sequence[Any], Mapping[str, Any]], Tuple[Sequence[Any], Mapping[str, Any]]]

_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
#: Where a call that does not fit the signature keeps what no parameter takes (no parameter
#: can have these names, so such a call never shares a key with one that fits).
_EXTRA_ARGS, _EXTRA_KWARGS = "*", "**"
#: In front of the text of a call that does not fit the signature: no list of key values starts so.
_UNFITTING = "!call"


def check_call_shape(args: Any, kwargs: Any) -> None:
    """Refuse what Celery refuses to publish, with its words: ``args`` not a list or tuple,
    ``kwargs`` not a mapping (before the key is derived from them)."""
    if args and not isinstance(args, (list, tuple)):
        raise TypeError("task args must be a list or tuple")
    if kwargs and not isinstance(kwargs, Mapping):
        raise TypeError("task keyword arguments must be a mapping")


class ArgumentKey:
    """Derives the lock digest of one task's calls.

    Built once per task (binding to the signature is prepared up front), then
    called on the hot path of every publish and every execution.
    """

    __slots__ = ("task_name", "_spec", "_signature", "_names", "_defaults", "_fast", "_selected", "_strict")

    def __init__(self, task_name: str, func: Callable[..., Any], spec: LockKeySpec = None,
                 strict: bool = True) -> None:
        self.task_name = task_name
        self._spec = spec
        #: Whether a call that does not fit the signature is refused (Celery's ``typing``); without
        #: it such a call is published, as Celery publishes it, and keyed by what was passed.
        self._strict = strict
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
        try:
            if self._fast:
                return self._bind_fast(args, kwargs)
            bound = self._signature.bind(*args, **kwargs)
        except TypeError:
            if self._strict:
                raise
            return self._bind_as_given(args, kwargs)
        bound.apply_defaults()
        return dict(bound.arguments)

    def _bind_as_given(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Dict[str, Any]:
        """A call that does not fit the signature (``typing=False``), by what was passed: positional
        arguments on the positional parameters they reach, keywords on the parameters they name,
        defaults where a parameter is left free, and the rest under names no parameter has."""
        params = list(self._signature.parameters.values())  # type: ignore[union-attr]
        positional = [p.name for p in params if p.kind in _POSITIONAL]
        keywords = {p.name for p in params if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD,
                                                         inspect.Parameter.KEYWORD_ONLY)}
        values: Dict[str, Any] = dict(zip(positional, args))
        extra_args, extra_kwargs = list(args[len(positional):]), {}
        for name, value in kwargs.items():
            if name in keywords and name not in values:
                values[name] = value
            else:
                extra_kwargs[name] = value
        for p in params:
            if p.kind is inspect.Parameter.VAR_POSITIONAL:
                values[p.name], extra_args = extra_args, []
            elif p.kind is inspect.Parameter.VAR_KEYWORD:
                values[p.name], extra_kwargs = extra_kwargs, {}
            elif p.name not in values and p.default is not inspect.Parameter.empty:
                values[p.name] = p.default
        if extra_args:
            values[_EXTRA_ARGS] = extra_args
        if extra_kwargs:
            values[_EXTRA_KWARGS] = extra_kwargs
        return values

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
    @property
    def arity(self) -> Optional[int]:
        """How many key values each call's key has: the names ``lock_key`` gives, one for a
        ``lock_key`` function (its string), else the task's parameters (``None``: no signature)."""
        if self._selected is not None:
            return len(self._selected)
        if self._spec is not None:
            return 1
        return len(self._names) if self._signature is not None else None

    def __call__(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        """The digest naming this call's lock, from the arguments as the body receives them."""
        if self._spec is not None and self._selected is None:  # a callable
            return digest(key_values_text((self._call_key_function(args, kwargs),)))
        return digest(self._encode(self._deciding(args, kwargs)))

    def old_digest(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        """The digest versions before keys by name and values gave this call: the bound arguments by
        parameter name, or a ``lock_key`` function's string as it was. Held beside the lock while a
        rolling deploy has older workers (``singleton_lock_guard_old_keys``)."""
        if self._spec is not None and self._selected is None:
            return digest(self._call_key_function(args, kwargs))
        values = self._deciding(args, kwargs)
        try:
            return digest(canonical_arguments(values))
        except (TypeError, ValueError):
            return digest(self._encode(values))  # raises the error that names the parameter

    def for_message(self, args: Sequence[Any], kwargs: Mapping[str, Any], deliver: Deliver) -> str:
        """The digest the worker will derive from a message carrying this call.

        The worker sees the arguments as the serializer gives them back (a tuple as a list, a
        dict shaped like a tagged value as that value), so the key is derived from
        ``deliver(args, kwargs)``, unless every argument it depends on is one that any serializer
        delivers unchanged: a plain scalar, or a list or tuple of them (the common big argument).
        """
        if self._spec is not None and self._selected is None:
            return digest(key_values_text((self._call_key_function(*deliver(args, kwargs)),)))
        values = self._deciding(args, kwargs)
        if not delivered_unchanged(values.values()):
            # Bind what the worker binds: the delivered arguments, then the Python defaults.
            values = self._deciding(*deliver(args, kwargs))
        return digest(self._encode(values))

    def deciding(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Union[str, Dict[str, Any]]:
        """What decides this call's lock: the ``lock_key`` function's string, or the bound arguments."""
        if self._spec is not None and self._selected is None:
            return self._call_key_function(args, kwargs)
        return self._deciding(args, kwargs)

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
        """The key's text: the deciding values in order (``lock_key``'s, else the signature's), without
        their parameter names, so another task or a shared lock naming the same values meets the same
        key. A call that does not fit the signature (``typing=False``) is written by name under a tag
        no list of values has: it shares a key only with the same call spelled otherwise."""
        try:
            if self._selected is not None:
                return key_values_text(values.values())
            if len(values) == len(self._names) and all(name in values for name in self._names):
                return key_values_text([values[name] for name in self._names])
            if self._signature is None:
                return key_values_text((values["args"], values["kwargs"]))
            return _UNFITTING + canonical_arguments(values)
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
            "pass JSON-like values (str, int, float, bool, None, list, dict, set, datetime, date, "
            "time, UUID, Decimal, bytes) or set lock_key to choose the parameters that decide the lock",
            task=self.task_name,
            parameter=culprit,
        ) from error
