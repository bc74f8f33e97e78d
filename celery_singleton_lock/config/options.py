"""Task options, resolved and validated once per task (app settings: :mod:`.settings`).

A task option is an ordinary ``@app.task(...)`` keyword (Celery turns it into a
class attribute). When the task leaves it unset, the app-wide default
``app.conf.singleton_lock_<name>`` applies, then the built-in default. All of it
is checked when the task is bound to its app (definition, or at the latest the
worker's start), so a wrong value never surfaces inside a running worker.
"""

from __future__ import annotations

import difflib
import math
from dataclasses import dataclass
from typing import Any, Callable, Collection, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..exceptions import ConfigurationError
from ..store import MAX_DURATION_MS, MAX_LIMIT

__all__ = ["LockOptions", "MAX_SECONDS", "MIN_TTL", "MIN_PERIOD", "valid_limit", "duration", "SCOPES", "ON_LOCKED",
           "ON_LOCK_ERROR", "resolve_options", "OPTION_NAMES", "SETTING_NAMES", "refuse_unknown_options",
           "check_app_defaults", "app_default_problems"]

SCOPES = ("running", "queued", "queued_or_running")
ON_LOCKED = ("skip", "retry", "wait", "raise", "replace")
ON_LOCK_ERROR = ("retry", "run", "raise")

# task attribute -> (app.conf key, built-in default)
_OPTIONS: Dict[str, Tuple[str, Any]] = {
    "lock_key": ("singleton_lock_key", None),
    "lock_scope": ("singleton_lock_scope", "running"),
    "lock_queue_ttl": ("singleton_lock_queue_ttl", 3600.0),
    "on_locked": ("singleton_lock_on_locked", "skip"),
    "lock_ttl": ("singleton_lock_ttl", 30.0),
    "lock_heartbeat": ("singleton_lock_heartbeat", None),  # None: lock_ttl / 3
    "lock_retry_delay": ("singleton_lock_retry_delay", 5.0),
    "lock_retry_max": ("singleton_lock_retry_max", None),
    "lock_wait_timeout": ("singleton_lock_wait_timeout", 30.0),
    "on_lock_error": ("singleton_lock_on_lock_error", "retry"),
    "lock_debounce": ("singleton_lock_debounce", None),  # None: no debounce
    "lock_debounce_max": ("singleton_lock_debounce_max", None),
    "lock_limit": ("singleton_lock_limit", 1),
    "lock_window": ("singleton_lock_window", 0.0),
}
#: Options that have no app-wide default: ``lock_name`` names one lock, an app-wide value would
#: make every task share it.
_TASK_ONLY = ("lock_name",)
OPTION_NAMES = (*_OPTIONS, *_TASK_ONLY)
#: Every ``app.conf`` setting of the library; any other ``singleton_lock_*`` key is a typo.
SETTING_NAMES = ("singleton_lock_url", "singleton_lock_prefix", "singleton_lock_transport_options",
                 "singleton_lock_backend", "singleton_lock_metrics_port", "singleton_lock_metrics_registry",
                 "singleton_lock_describe", "singleton_lock_guard_old_keys",
                 *(conf_key for conf_key, _ in _OPTIONS.values()))
#: Task attributes with these prefixes are lock options; any other such name is a typo.
_OPTION_PREFIXES = ("lock_", "on_lock")


@dataclass(frozen=True)
class LockOptions:
    """One task's resolved lock options (seconds as floats)."""

    key: Union[None, Tuple[str, ...], Callable[..., str]]
    scope: str
    queue_ttl: float
    on_locked: str
    ttl: float
    heartbeat: float
    retry_delay: float
    retry_max: Optional[int]
    wait_timeout: float
    on_lock_error: str
    #: Holders of one key at once: an int, or a function of the call's arguments returning one
    #: (see :mod:`.limits`).
    limit: Union[int, Callable[..., int]] = 1
    #: Seconds a holder's place is kept after it was taken (see :mod:`.limits`).
    window: float = 0.0
    #: Trailing-edge debounce (seconds), and how long a burst may last at most; ``None``: unset.
    debounce: Optional[float] = None
    debounce_max: Optional[float] = None
    #: The name the task's lock keys are made under (``lock_name``; ``""``: the task's own name).
    #: Tasks with the same name and equal key values share one lock.
    name: str = ""

    def key_name(self, task: str) -> str:
        """The name the lock keys of ``task`` are made under."""
        return self.name or task

    @property
    def latest_wins(self) -> bool:
        """Whether the newest call of a key takes the place of the ones still waiting
        (``on_locked="replace"``, which ``lock_debounce`` implies)."""
        return self.on_locked == "replace"

    @property
    def at_enqueue(self) -> bool:
        """Whether ``apply_async`` takes a lock before publishing."""
        return self.scope != "running"


def _fail(task: str, message: str) -> ConfigurationError:
    return ConfigurationError(f"task {task!r}: {message}", task=task)


def _choice(task: str, name: str, value: Any, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise _fail(task, f"{name}={value!r} is not one of {', '.join(map(repr, allowed))}")
    return value


#: The longest duration an option may name (s): what the store keeps exactly (``MAX_DURATION_MS``).
MAX_SECONDS = MAX_DURATION_MS // 1000
#: The shortest lease (s): a lock key's life (``lock_ttl``, ``lock_queue_ttl``, a shared lock's ``ttl``)
#: below 10 ms is gone before a round trip to Redis has told anyone it was taken.
MIN_TTL = 0.01
#: The shortest renewal period (s): the store counts whole milliseconds, and a shorter period only
#: spins the renewal thread (``lock_heartbeat=1e-12`` is thousands of renewals a second).
MIN_PERIOD = 0.001
#: What each of those minimums is, in the words of a refusal.
_MINIMUMS = {MIN_TTL: "the 10 ms Redis can keep", MIN_PERIOD: "the 1 ms the lock store counts"}


def duration(where: str, name: str, value: Any, *, allow_zero: bool = False, task: Optional[str] = None,
             minimum: Optional[float] = None) -> float:
    """A duration in seconds, or a :class:`ConfigurationError` that says ``where`` and names it.

    ``nan`` passes every comparison and infinity or a huge number would overflow the store's clock
    arithmetic (a window of 1e16 s ends before it starts), so each is refused here, naming the
    option, rather than met later inside a worker holding a lock."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigurationError(f"{where}: {name} must be a number of seconds, not {value!r}", task=task)
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigurationError(f"{where}: {name}={value!r} is not a finite number of seconds", task=task)
    if value < 0 or (value == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigurationError(f"{where}: {name}={value!r} must be {bound}", task=task)
    if value > MAX_SECONDS:
        raise ConfigurationError(f"{where}: {name}={value!r} is longer than the {MAX_SECONDS} s (about 31 years) "
                                 "the lock store counts exactly", task=task)
    if minimum is not None and value < minimum:
        raise ConfigurationError(f"{where}: {name}={value!r} is below {_MINIMUMS[minimum]}", task=task)
    return float(value)


def _seconds(task: str, name: str, value: Any, *, allow_zero: bool = False, minimum: Optional[float] = None) -> float:
    return duration(f"task {task!r}", name, value, allow_zero=allow_zero, task=task, minimum=minimum)


def valid_limit(value: Any) -> bool:
    """Whether ``value`` is a ``lock_limit`` the store can keep: an int from 1 to ``MAX_LIMIT``."""
    return not isinstance(value, bool) and isinstance(value, int) and 1 <= value <= MAX_LIMIT


def refuse_unknown_options(task: str, attributes: Iterable[Tuple[str, Any]], allowed: Collection[str] = ()) -> None:
    """Refuse a ``lock_*`` / ``on_lock*`` attribute that is no option (``lock_tll=5``): silently
    ignored, it would leave the default in force. ``allowed`` are names the task class itself uses."""
    for name, value in attributes:
        if not name.startswith(_OPTION_PREFIXES) or name in OPTION_NAMES or name in allowed:
            continue
        close = difflib.get_close_matches(name, OPTION_NAMES, n=1, cutoff=0.5)
        hint = f"did you mean {close[0]}?" if close else f"the options are {', '.join(OPTION_NAMES)}"
        raise _fail(task, f"unknown lock option {name}={value!r}: {hint}")


#: How each app-wide default is checked on its own (combinations are checked per task, where the
#: task's own options may settle them): (check, allow zero) for the numbers.
_DEFAULT_CHOICES = {"lock_scope": SCOPES, "on_locked": ON_LOCKED, "on_lock_error": ON_LOCK_ERROR}
_DEFAULT_SECONDS = {"lock_queue_ttl": False, "lock_ttl": False, "lock_heartbeat": False, "lock_retry_delay": True,
                    "lock_wait_timeout": True, "lock_debounce": False, "lock_debounce_max": False,
                    "lock_window": True}
_DEFAULT_MINIMUMS = {"lock_queue_ttl": MIN_TTL, "lock_ttl": MIN_TTL, "lock_heartbeat": MIN_PERIOD}


def check_app_defaults(conf: Mapping[str, Any], written: Optional[Mapping[str, str]] = None) -> None:
    """Refuse a wrong app-wide default (``singleton_lock_on_locked = "skipp"``) when the app is set up,
    whether or not a task reads it; ``written`` maps our names to the keys as the user wrote them."""
    for _, problem in app_default_problems(conf, written)[:1]:
        raise problem


def app_default_problems(conf: Mapping[str, Any],
                         written: Optional[Mapping[str, str]] = None) -> List[Tuple[str, ConfigurationError]]:
    """Every wrong app-wide default, each judged on its own: (its ``app.conf`` key, what is wrong)."""
    problems = []
    for option, (conf_key, _) in _OPTIONS.items():
        value = conf.get(conf_key)
        if value is None:
            continue
        where = (written or {}).get(conf_key, f"app.conf.{conf_key}")
        try:
            if option in _DEFAULT_CHOICES:
                _choice(where, option, value, _DEFAULT_CHOICES[option])
            elif option in _DEFAULT_SECONDS:
                _seconds(where, option, value, allow_zero=_DEFAULT_SECONDS[option],
                         minimum=_DEFAULT_MINIMUMS.get(option))
            elif option == "lock_retry_max" and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise _fail(where, f"must be None or an int >= 0, not {value!r}")
            elif option == "lock_limit" and not callable(value) and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise _fail(where, f"must be an int >= 1 or a function of the call's arguments, not {value!r}")
        except ConfigurationError as exc:
            message = str(exc).split(": ", 1)[1]
            wrong = ConfigurationError(f"app-wide default {where} = {value!r} is wrong: {message}")
            problems.append((conf_key, wrong))
    return problems


def resolve_options(task: str, attrs: Callable[[str], Any], conf: Mapping[str, Any]) -> LockOptions:
    """Merge task attributes over app settings over defaults, and check every value."""

    def pick(name: str) -> Any:
        value = attrs(name)
        if value is None:
            conf_key, default = _OPTIONS[name]
            value = conf.get(conf_key, default)
            value = default if value is None else value
        return value

    key = pick("lock_key")
    if isinstance(key, list):
        key = tuple(key)
    scope = _choice(task, "lock_scope", pick("lock_scope"), SCOPES)
    debounce, debounce_max = _debounce(task, pick("lock_debounce"), pick("lock_debounce_max"))
    on_locked = _choice(task, "on_locked", _on_locked(task, attrs("on_locked"), pick("on_locked"), debounce),
                        ON_LOCKED)
    on_lock_error = _choice(task, "on_lock_error", pick("on_lock_error"), ON_LOCK_ERROR)
    ttl = _seconds(task, "lock_ttl", pick("lock_ttl"), minimum=MIN_TTL)
    heartbeat_value = pick("lock_heartbeat")
    heartbeat = (ttl / 3 if heartbeat_value is None
                 else _seconds(task, "lock_heartbeat", heartbeat_value, minimum=MIN_PERIOD))
    if heartbeat >= ttl:
        raise _fail(task, f"lock_heartbeat={heartbeat!r} must be shorter than lock_ttl={ttl!r} "
                          "(the lock would expire between renewals)")
    retry_max = pick("lock_retry_max")
    if retry_max is not None and (isinstance(retry_max, bool) or not isinstance(retry_max, int) or retry_max < 0):
        raise _fail(task, f"lock_retry_max must be None or an int >= 0, not {retry_max!r}")
    limit = pick("lock_limit")
    if not callable(limit) and not valid_limit(limit):
        raise _fail(task, f"lock_limit must be an int from 1 to {MAX_LIMIT} or a function of the call's arguments "
                          f"returning one, not {limit!r}")
    options = LockOptions(
        key=key,
        scope=scope,
        queue_ttl=_seconds(task, "lock_queue_ttl", pick("lock_queue_ttl"), minimum=MIN_TTL),
        on_locked=on_locked,
        ttl=ttl,
        heartbeat=heartbeat,
        retry_delay=_seconds(task, "lock_retry_delay", pick("lock_retry_delay"), allow_zero=True),
        retry_max=retry_max,
        wait_timeout=_seconds(task, "lock_wait_timeout", pick("lock_wait_timeout"), allow_zero=True),
        on_lock_error=on_lock_error,
        debounce=debounce,
        debounce_max=debounce_max,
        limit=limit,
        window=_seconds(task, "lock_window", pick("lock_window"), allow_zero=True),
        name=_lock_name(task, attrs("lock_name")),
    )
    if on_locked == "replace" and scope == "running" and debounce is None:
        raise _fail(task, 'on_locked="replace" needs lock_scope="queued" or "queued_or_running" (with '
                          '"running" no copy waits to be replaced), or lock_debounce')
    if scope == "queued_or_running" and on_locked == "wait":
        raise _fail(task, 'on_locked="wait" makes no sense with lock_scope="queued_or_running": '
                          "apply_async would block the caller until the queued copy has run; "
                          'use "skip", "raise" or "retry"')
    return options


def _lock_name(task: str, value: Any) -> str:
    """``lock_name``: a non-empty string, the task's own name when unset."""
    if value is None:
        return task
    if not isinstance(value, str) or not value.strip():
        raise _fail(task, f"lock_name must be a non-empty str (the name of the lock the task shares), not {value!r}")
    return value


def _debounce(task: str, debounce: Any, debounce_max: Any) -> Tuple[Optional[float], Optional[float]]:
    """``lock_debounce`` (> 0) and ``lock_debounce_max`` (> ``lock_debounce``), or ``None``."""
    quiet = None if debounce is None else _seconds(task, "lock_debounce", debounce)
    if debounce_max is None:
        return quiet, None
    if quiet is None:
        raise _fail(task, f"lock_debounce_max={debounce_max!r} needs lock_debounce (it caps a debounced burst)")
    longest = _seconds(task, "lock_debounce_max", debounce_max)
    if longest <= quiet:
        raise _fail(task, f"lock_debounce_max={longest!r} must be longer than lock_debounce={quiet!r}")
    return quiet, longest


def _on_locked(task: str, own: Any, resolved: Any, debounce: Optional[float]) -> Any:
    """A debounced task's duplicates are replaced by the newest call; another ``on_locked`` that the
    task itself names contradicts its ``lock_debounce`` (an app-wide default gives way to it)."""
    if debounce is None:
        return resolved
    if own is not None and own != "replace":
        raise _fail(task, f"on_locked={own!r} contradicts lock_debounce={debounce!r}: a debounced call "
                          'replaces the one waiting before it (on_locked="replace", the default with lock_debounce)')
    return "replace"
