"""``SharedLock``: N places on a named resource, held as a block in any code.

::

    payments = SharedLock("payments-api", limit=5)          # 5 at once, across every worker
    partner = SharedLock("partner", limit=100, window=60)   # 100 starts a minute

    @app.task
    def charge(customer_id):
        with payments.hold() as held:       # held.key, .token, .fencing_token, .lost, .check()
            ...
        with SharedLock("tenant").hold(customer_id):   # one place per key value
            ...

A shared lock is a task's lock with a name of its own: its keys are made under the name as
a task's are under its name (``lock_name``), its key values encoded as a task's arguments
are, so the places, the window, the renewal, the release by token and the operator's view
are the ones a task's lock has. Defining one costs nothing: the app (``app``, else Celery's
current app) is read when a block first takes a place.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple

from celery import _state, current_app

from ..calls.encoding import digest, key_values_text
from ..config.options import MIN_TTL, valid_limit
from ..config.sharing import Sharer, refuse_other_arity
from ..config.settings import resolve_settings
from ..exceptions import ConfigurationError, UnencodableArgumentError
from ..runtime.lock_runtime import LockRuntime, runtime_for
from ..store import MAX_LIMIT, QUORUM_LIMIT, Limit, LockKeys, keeps_one_place, limited
from .hold import Hold
from .held import HeldPlace
from .tuning import Tuning, seconds, tune

__all__ = ["SharedLock", "ON_LOCKED", "refuse_unbound"]

#: What a hold does when every place of its key is taken (see :mod:`.take`).
ON_LOCKED = ("wait", "raise", "retry")


class SharedLock:
    """Places on the resource ``name``: at most ``limit`` holders of one key at once, each place
    kept at least ``window`` seconds after it was taken.

    ``hold(*key_values)`` is one block's place (``with lock.hold(account_id) as held:``); ``with
    lock:`` is ``lock.hold()``. ``ttl`` and ``wait_timeout`` default to the app's
    ``singleton_lock_ttl`` and ``singleton_lock_wait_timeout``.
    """

    def __init__(self, name: str, *, limit: int = 1, window: float = 0, ttl: Optional[float] = None,
                 on_locked: str = "wait", wait_timeout: Optional[float] = None, app: Any = None) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigurationError(f"SharedLock: the name must be a non-empty str, not {name!r}")
        where = f"shared lock {name!r}"
        if not valid_limit(limit):
            raise ConfigurationError(f"{where}: limit must be an int from 1 to {MAX_LIMIT}, not {limit!r}", task=name)
        if on_locked not in ON_LOCKED:
            raise ConfigurationError(f"{where}: on_locked={on_locked!r} is not one of "
                                     f"{', '.join(map(repr, ON_LOCKED))}", task=name)
        self.name = name
        self.limit = limit
        self.window = seconds(where, "window", window, allow_zero=True)
        self.ttl = None if ttl is None else seconds(where, "ttl", ttl, minimum=MIN_TTL)
        self.on_locked = on_locked
        self.wait_timeout = None if wait_timeout is None else seconds(where, "wait_timeout", wait_timeout,
                                                                       allow_zero=True)
        #: The app named at construction (``None``: Celery's current app, when a block runs). Signal
        #: receivers (the metrics) read it as they read a task's.
        self._app = app
        self._limit = Limit(self.limit, int(round(self.window * 1000)))
        self._tuned: Dict[int, Tuple[Any, Tuning]] = {}
        self._arities: Dict[int, Tuple[Any, Set[int]]] = {}  # numbers of key values checked, per app
        self._bare: Dict[int, Tuple[LockRuntime, LockKeys]] = {}  # the name alone's keys, per runtime
        self._blocks = threading.local()  # ``with lock:``: each thread's open holds, innermost last
        if app is not None:
            self._refuse_unsupported(app)
        else:
            _UNBOUND.add(self)

    # -- what the resource is under an app ------------------------------------------------------------
    @property
    def app(self) -> Any:
        """The app whose lock store keeps the places: the one named at construction, else Celery's
        current app. In a thread the app was not made in (a web server's), Celery's current app is
        its unconfigured fallback: the one app this process made is meant, so it is the one used."""
        if self._app is not None:
            return self._app
        app = current_app._get_current_object()
        return _only_app(self.name, app) if _fallback(app) else app

    @property
    def where(self) -> str:
        """How messages name this lock."""
        return f"shared lock {self.name!r}"

    @property
    def place_limit(self) -> Limit:
        """The store's limit: ``Limit(1, 0)`` is the singleton lock's exact path."""
        return self._limit

    def tuning(self, app: Any) -> Tuning:
        """The lease and wait timings under ``app`` (read once per app; checked as a task's are)."""
        known = self._tuned.get(id(app))
        if known is None or known[0] is not app:
            self._refuse_unsupported(app)
            known = (app, tune(self.where, app.conf, self.ttl, self.wait_timeout))
            self._tuned[id(app)] = known
        return known[1]

    def refuse_unsupported(self, app: Any) -> None:
        """Refuse what ``app``'s lock store cannot keep (a worker's start calls it: :func:`refuse_unbound`)."""
        self._refuse_unsupported(app)

    def _refuse_unsupported(self, app: Any) -> None:
        """A quorum of masters keeps one place per key: ``limit > 1`` is refused there, as ``lock_limit`` is."""
        settings = resolve_settings(app.conf)
        if self.limit > 1 and keeps_one_place(settings.url, settings.backend):
            raise ConfigurationError(f"{self.where}: limit={self.limit!r} with a quorum lock store: {QUORUM_LIMIT}",
                                     task=self.name)

    def keys(self, runtime: LockRuntime, values: Tuple[Any, ...]) -> LockKeys:
        """The keys of the place ``values`` name, under the name, encoded as a task's arguments are."""
        if not values:  # the commonest hold (``with lock:``): its keys are made once per runtime
            known = self._bare.get(id(runtime))
            if known is None or known[0] is not runtime:
                known = self._bare[id(runtime)] = (runtime, self._keys(runtime, values))
            return known[1]
        return self._keys(runtime, values)

    def _keys(self, runtime: LockRuntime, values: Tuple[Any, ...]) -> LockKeys:
        self._refuse_other_arity(runtime.app, len(values))
        try:
            text = key_values_text(values)
        except (TypeError, ValueError) as exc:
            raise UnencodableArgumentError(
                f"{self.where}: a key value cannot be used in a lock key ({exc}); pass JSON-like values (str, int, "
                "float, bool, None, list, dict, set, datetime, date, time, UUID, Decimal, bytes)", task=self.name,
            ) from exc
        return limited(runtime.layout.keys(self.name, digest(text), "running"), self.place_limit)

    def _refuse_other_arity(self, app: Any, count: int) -> None:
        """A block naming the key of a task's lock gives as many values as the task's calls do
        (checked once per app and number of values)."""
        known = self._arities.get(id(app))
        if known is None or known[0] is not app:
            known = self._arities[id(app)] = (app, set())
        if count in known[1]:
            return
        refuse_other_arity(self.where, self.name, count, _sharers(app))
        known[1].add(count)

    # -- the blocks ----------------------------------------------------------------------------------
    def hold(self, *key_values: Any) -> Hold:
        """One place of the key ``name`` + ``key_values``, for one ``with`` block."""
        return Hold(self, key_values, runtime_for(self.app))

    def __enter__(self) -> HeldPlace:
        hold = self.hold()
        held = hold.__enter__()
        self._open().append(hold)
        return held

    def __exit__(self, *exc_info: Any) -> None:
        self._open().pop().__exit__(*exc_info)

    def _open(self) -> List[Hold]:
        stack = getattr(self._blocks, "stack", None)
        if stack is None:
            stack = self._blocks.stack = []
        return stack

    def __repr__(self) -> str:
        window = f", window={self.window:g}" if self.window else ""
        return f"<SharedLock {self.name!r} limit={self.limit}{window} on_locked={self.on_locked!r}>"


def _sharers(app: Any) -> Iterator[Sharer]:
    """The app's tasks that keep a lock: each one's name, options and number of key values."""
    for task in list(app.tasks.values()):
        resolve = getattr(task, "singleton_lock", None)
        if callable(resolve):
            options, argument_key = resolve()
            yield task.name, options, argument_key.arity


#: Shared locks made without ``app=`` (module-level ones, mostly): nothing could be checked at their
#: construction, so a worker checks them against its app as it starts. Weak: a lock that is gone
#: leaves the set.
_UNBOUND: "weakref.WeakSet[SharedLock]" = weakref.WeakSet()


def refuse_unbound(app: Any) -> None:
    """Refuse, as a worker of ``app`` starts, a shared lock made without ``app=`` that ``app``'s lock
    store cannot keep (``limit > 1`` on a quorum), instead of at its first block inside a running task."""
    for lock in list(_UNBOUND):
        lock.refuse_unsupported(app)


def _fallback(app: Any) -> bool:
    """Whether ``app`` is the app Celery makes up where no app is current (named ``default``)."""
    return app is _state.default_app and app.main == "default"


def _only_app(name: str, fallback: Any) -> Any:
    """The one app of this process besides Celery's fallback, or an error that says what to do."""
    apps = [app for app in _state._get_active_apps() if app is not fallback]
    if len(apps) == 1:
        return apps[0]
    raise ConfigurationError(f"shared lock {name!r}: no app to use in this thread: Celery's current app here is its "
                             f"fallback (the thread did not make the app) and this process has {len(apps)} apps; "
                             f"pass SharedLock(..., app=app), or call app.set_default() once", task=name)
