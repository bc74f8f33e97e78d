"""Where redis-py releases differ in an API the store uses, the difference is bridged here.

The store is written against the newest redis-py; every older release the
package declares gets its spelling from this module, decided once from the
installed code rather than from version numbers.
"""

from __future__ import annotations

import inspect
from typing import Any

__all__ = ["checkout"]


def _wants_command_name(pool: Any) -> bool:
    """redis-py before 6 requires a command name (unused by the pool) to hand out a connection;
    6 and later take none and warn when given one."""
    try:
        parameters = inspect.signature(pool.get_connection).parameters
    except (TypeError, ValueError):  # pragma: no cover - a C-implemented or odd pool
        return False
    parameter = parameters.get("command_name")
    return parameter is not None and parameter.default is inspect.Parameter.empty


def checkout(pool: Any) -> Any:
    """A connection from ``pool``, to be given back with ``pool.release`` (the lane keeps its
    connection, so this runs once per connection and the signature is read each time)."""
    if _wants_command_name(pool):
        return pool.get_connection("EVALSHA")
    return pool.get_connection()
