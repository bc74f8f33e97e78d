"""Tell an outage of the lock store from a lock store that is set up wrong.

An outage (connection refused or reset, a timeout, a failover, a server still
loading its data, a cluster slot moving) passes: retrying later is the right
answer, and a task's ``on_lock_error`` decides what to do meanwhile. A lock
store that is set up wrong (a wrong password, an ACL user that lacks a command,
a read-only replica, a database index the server does not have) answers the
same way on every try, and so does a TLS certificate that does not verify:
retrying forever hides it, and running the body without
its lock because of it would turn a typo into duplicate runs. Such an error is
*permanent*; :func:`permanent_problem` says what is wrong and what to do.

redis-py 8 prints an error's class and category in its ``repr`` but not its
text (``auth:AuthenticationError``); :func:`error_text` keeps both.
"""

from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple, Type

import redis.exceptions as rex

from . import scripts
from .tls import verification_failure

__all__ = ["error_text", "permanent_problem", "is_permanent", "SCRIPT_COMMANDS", "STORE_ERRORS"]

#: What a store raises when it could not answer (as opposed to a bug): redis-py's errors
#: (its Cluster errors are no RedisError) and the socket's.
STORE_ERRORS: Tuple[Type[BaseException], ...] = (rex.RedisError, OSError, rex.RedisClusterException)


def _classes(*names: str) -> Tuple[Type[BaseException], ...]:
    """The named redis-py exception classes that this redis-py has (older ones lack a few)."""
    return tuple(getattr(rex, name) for name in names if isinstance(getattr(rex, name, None), type))


#: Credentials refused: wrong password or user, a user that is disabled, no password given.
_AUTH = _classes("AuthenticationError", "AuthorizationError", "AuthenticationWrongNumberOfArgsError")
#: Error replies that pass: a failover, a loading server, a moving slot, a busy or full server.
_PASSING = _classes("BusyLoadingError", "TryAgainError", "ClusterDownError", "MasterDownError", "AskError",
                    "NoScriptError", "OutOfMemoryError", "ExecAbortError")
_PASSING_CODES = ("LOADING", "TRYAGAIN", "CLUSTERDOWN", "MASTERDOWN", "BUSY", "OOM", "NOREPLICAS", "NOSCRIPT",
                  "ASK", "MOVED")

#: The Redis commands each of the protocol's scripts runs, read from the scripts themselves.
SCRIPT_COMMANDS: Dict[str, Tuple[str, ...]] = {
    name.lower(): tuple(dict.fromkeys(re.findall(r"redis\.p?call\('(\w+)'", getattr(scripts, name))))
    for name in scripts.__all__
}
#: The commands of the protocol's other steps (see :mod:`.probe`).
_STEP_COMMANDS: Dict[str, Tuple[str, ...]] = {
    "acquire": ("set", "get", "pttl"), "holder": ("get", "pttl"), "subscribe": ("subscribe", "unsubscribe"),
    "connect": ("hello", "auth", "ping", "select", "info"),
}


def error_text(exc: BaseException) -> str:
    """``Class: message`` (the message alone is ambiguous, the class alone says nothing)."""
    text = str(exc).strip()
    name = type(exc).__name__
    return f"{name}: {text}" if text else name


def _code(exc: BaseException) -> str:
    """The error reply's code (``NOPERM``, ``READONLY``...) when redis-py kept it."""
    code = getattr(exc, "status_code", None)
    if isinstance(code, str) and code.isupper():
        return code
    first = str(exc).split(" ", 1)[0]
    return first if first.isupper() and first.isalpha() else ""


def _step(script: Optional[str]) -> str:
    """Where the refusal came from: ``" in the acquire script (it runs hmget, ...)"``."""
    name = (script or "").lower()
    if name in SCRIPT_COMMANDS:
        return f" in the {name} script (evalsha, eval, script|load; inside it {', '.join(SCRIPT_COMMANDS[name])})"
    if name in _STEP_COMMANDS:
        return f" at the {name} step ({', '.join(_STEP_COMMANDS[name])})"
    return ""


def permanent_problem(exc: BaseException, script: Optional[str] = None) -> Optional[str]:
    """What is wrong with the lock store's setup, and what to do, if ``exc`` says so; ``None`` for an outage.

    ``script`` names the protocol script (``"acquire"``...) or step that was running,
    so a refusal can be told with the commands that step needs.
    """
    nested = _quorum_problem(exc)
    if nested is not None:
        return nested or None
    text = str(exc)
    lowered = text.lower()
    code = _code(exc)
    if isinstance(exc, _AUTH) or code in ("WRONGPASS", "NOAUTH"):
        return (f"authentication failed ({error_text(exc)}): set the right user and password in the lock URL "
                "(singleton_lock_url, or the broker URL it falls back to)")
    if "db index" in lowered or "invalid database" in lowered:
        return (f"the database index does not exist on this server ({error_text(exc)}): pick a database below "
                "the server's `databases` setting in singleton_lock_url")
    refused_certificate = verification_failure(exc)
    if refused_certificate is not None:
        return (f"TLS verification of the lock store failed ({refused_certificate}): either the server is not "
                "the one the URL names (someone may pose as it), or this client is set up wrong: give ssl_ca_certs "
                "the CA that signed the server's certificate, reach the server by a name that certificate "
                "carries, and, when the server asks for one, give a client certificate (docs/security.md, TLS)")
    if isinstance(exc, (rex.ConnectionError, rex.TimeoutError, OSError)):
        return None  # also a read-only master a Sentinel client dropped: it finds the new one
    if not isinstance(exc, rex.ResponseError):
        return None  # a reply redis-py could not read, a broken connection: retrying is right
    if isinstance(exc, _classes("NoPermissionError")) or code == "NOPERM" or "no permissions" in lowered or \
            "can't run this command" in lowered or "can't access" in lowered:
        return (f"the Redis user lacks a permission{_step(script)} ({error_text(exc)}): grant "
                "its ACL user the commands, the key pattern ~<prefix>:* and the channel pattern &<prefix>:* "
                "that docs/security.md lists")
    if isinstance(exc, _classes("ReadOnlyError")) or code == "READONLY" or "read only replica" in lowered:
        return (f"the server is a read-only replica ({error_text(exc)}): point singleton_lock_url at the "
                "master, or at the Sentinels (sentinel://) so that the current master is found")
    if isinstance(exc, _PASSING) or code in _PASSING_CODES:
        return None
    if "unknown command" in lowered:
        return (f"the server does not run a command the library needs ({error_text(exc)}): the lock store "
                "must be a Redis that runs Lua scripts (EVAL, EVALSHA), not a proxy that renames or drops commands")
    return (f"the lock store answered with an error ({error_text(exc)}): check singleton_lock_url and "
            "singleton_lock_prefix (does another application write keys under the prefix?)")


def _quorum_problem(exc: BaseException) -> Optional[str]:
    """For a quorum that could not decide: ``""`` when only outages stand in the way, the problem when
    misconfigured masters alone leave no majority; ``None`` when ``exc`` is no such error."""
    errors: Any = getattr(exc, "errors", None)
    size, quorum = getattr(exc, "size", None), getattr(exc, "quorum", None)
    if not isinstance(errors, dict) or not isinstance(size, int) or not isinstance(quorum, int):
        return None
    problems = {index: permanent_problem(error) for index, error in errors.items()}
    wrong = {index: problem for index, problem in problems.items() if problem}
    if len(wrong) <= size - quorum:
        return ""  # the others may answer again: an outage
    return "; ".join(f"master {index}: {problem}" for index, problem in sorted(wrong.items()))


def is_permanent(exc: BaseException) -> bool:
    """Whether ``exc`` means a misconfigured lock store rather than an outage."""
    return permanent_problem(exc) is not None
