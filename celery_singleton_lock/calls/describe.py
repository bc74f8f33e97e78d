"""The call behind a lock, in a few words: ``account_id=42``, for ``celery locks`` and the signals.

A lock's key names its arguments by digest only (no user data in key names). With the app
setting ``singleton_lock_describe = True`` (off by default: arguments may be private) each
lock also stores a short description of the arguments that decide it (those ``lock_key``
names, or all), or a ``lock_key`` function's string as it is, capped at
:data:`MAX_CHARS` characters, with control characters replaced by spaces.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional, Sequence

from ..exceptions import ConfigurationError

__all__ = ["SETTING", "MAX_CHARS", "describe_enabled", "describe_call", "describe_values"]

SETTING = "singleton_lock_describe"
#: The longest description stored with a lock (an ellipsis ends a longer one).
MAX_CHARS = 120
#: The longest text of one argument's value.
_VALUE_CHARS = 40
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def describe_enabled(conf: Any) -> bool:
    """Whether the app describes its calls; a value that is not a bool is refused."""
    value = conf.get(SETTING, False)
    if not isinstance(value, bool):
        raise ConfigurationError(f"{SETTING} must be True or False, not {value!r}")
    return value


def _cap(text: str, limit: int) -> str:
    text = _CONTROL.sub(" ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def describe_call(argument_key: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Optional[str]:
    """``name=value, ...`` of the arguments that decide the lock (a ``lock_key`` function's string
    as it is), capped; ``None`` when they cannot be read (the lock's digest still names them)."""
    try:
        deciding = argument_key.deciding(args, kwargs)
    except Exception:
        return None
    if isinstance(deciding, str):
        return _cap(deciding, MAX_CHARS)
    return _cap(", ".join(f"{name}={_cap(repr(value), _VALUE_CHARS)}" for name, value in deciding.items()),
                MAX_CHARS)


def describe_values(values: Sequence[Any]) -> Optional[str]:
    """The key values of a shared hold (``SharedLock.hold(42, "eu")``: ``42, 'eu'``), capped;
    ``None`` for a hold of the name alone."""
    if not values:
        return None
    return _cap(", ".join(_cap(repr(value), _VALUE_CHARS) for value in values), MAX_CHARS)
