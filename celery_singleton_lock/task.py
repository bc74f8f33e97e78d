"""``LockedTask``: a Celery base task that runs one copy at a time per distinct arguments.

Producer and consumer need nothing but the base class::

    from celery_singleton_lock import LockedTask

    @app.task(base=LockedTask)
    def refresh_account(account_id, full=False): ...

    @app.task(base=LockedTask, bind=True, lock_key=("account_id",), on_locked="retry", lock_ttl=20)
    def sync(self, account_id, payload):
        write(payload, fencing_token=self.lock.fencing_token)

Options are ordinary task keywords (see :mod:`celery_singleton_lock.options`);
unset ones fall back to ``app.conf.singleton_lock_*``.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, ClassVar, Iterator, Mapping, Optional, Sequence, Tuple

from celery import Task

from .calls import headers
from .enqueue import supersede
from .calls.arguments import ArgumentKey, LockKeySpec, check_call_shape
from .config import refused
from .exceptions import ConfigurationError, LockedError
from .run.handle import ExecutionLock
from .calls.limits import refuse_unsupported
from .config.options import LockOptions, refuse_unknown_options, resolve_options
from .config.sharing import refuse_disagreeing
from .config.settings import resolve_settings
from .enqueue.publish import CallOptions, publish_locked
from .enqueue.refusals import publish_digest
from .run.guarded import current_lock, in_own_execution, lock_hidden, run_guarded

__all__ = ["LockedTask"]


def _signature_target(cls: type) -> Any:
    """The callable whose signature the body has, without ``self`` for methods and bound tasks."""
    raw = inspect.getattr_static(cls, "run")
    if isinstance(raw, staticmethod):
        return raw.__func__
    return types.MethodType(raw, object())


class LockedTask(Task):
    """A task whose executions with equal arguments never overlap.

    Subclasses (or ``@app.task(base=LockedTask, ...)``) set the lock options as
    class attributes; ``None`` means "use the app setting or the default".
    """

    #: The worker-side request class: releases a lock from the main process
    #: when the pool child cannot (terminate, hard time limit, child killed).
    Request = "celery_singleton_lock.worker.request:LockedRequest"

    lock_key: LockKeySpec = None
    lock_scope: Optional[str] = None
    lock_queue_ttl: Optional[float] = None
    on_locked: Optional[str] = None
    lock_ttl: Optional[float] = None
    lock_heartbeat: Optional[float] = None
    lock_retry_delay: Optional[float] = None
    lock_retry_max: Optional[int] = None
    lock_wait_timeout: Optional[float] = None
    on_lock_error: Optional[str] = None
    lock_limit: Any = None
    lock_window: Optional[float] = None
    lock_name: Optional[str] = None

    _singleton_lock_resolved: ClassVar[Optional[Tuple[Any, LockOptions, ArgumentKey]]] = None

    @classmethod
    def on_bound(cls, app: Any) -> None:
        """Resolve and validate the lock options now, so a wrong value fails at definition/worker start."""
        super().on_bound(app)
        if cls._is_concrete():
            cls._resolve_singleton_lock(app)
            if cls.lock_name is not None and not app.finalized and app.autofinalize:
                # Tasks sharing the name are judged against each other only once bound: bind them all
                # now, so that whichever is called first, a disagreement refuses both from the first call.
                app.finalize(auto=True)

    @classmethod
    def _is_concrete(cls) -> bool:
        return bool(cls.name) and inspect.getattr_static(cls, "run") is not inspect.getattr_static(Task, "run")

    @classmethod
    def _resolve_singleton_lock(cls, app: Any) -> Tuple[LockOptions, ArgumentKey]:
        """Resolve once; a refusal is kept and raised the same way at every later use (see :mod:`.config.refused`)."""
        refusal = refused.kept(app, cls)
        if refusal is not None:
            raise refusal
        try:
            return cls._resolve_options(app)
        except ConfigurationError as exc:
            raise refused.refuse(app, exc, cls)

    @classmethod
    def _resolve_options(cls, app: Any) -> Tuple[LockOptions, ArgumentKey]:
        settings = resolve_settings(app.conf)  # the app's lock settings too: a wrong URL or prefix fails now
        refuse_unknown_options(cls.name, _own_attributes(cls), _class_names())
        options = resolve_options(cls.name, lambda attr: getattr(cls, attr, None), app.conf)
        supersede.refuse_without_generations(cls.name, options, settings)
        refuse_unsupported(cls.name, options, settings)
        argument_key = ArgumentKey(cls.name, _signature_target(cls), options.key, strict=cls.typing is not False)
        sharing = list(_sharing(app, cls.name, options.key_name(cls.name)))
        try:
            refuse_disagreeing([*sharing, (cls.name, options, argument_key.arity)])
        except ConfigurationError as exc:
            for other, *_ in sharing:  # the shared lock itself is wrong: each task under it is refused alike
                partner = type(app._tasks[other])
                partner._singleton_lock_resolved = None
                refused.keep(app, partner, exc)
            raise
        cls._singleton_lock_resolved = (app, options, argument_key)
        if options.on_locked == "raise" and not issubclass(LockedError, tuple(cls.throws)):
            # A duplicate refused is an expected outcome: the worker logs one line, not a traceback.
            cls.throws = (*cls.throws, LockedError)
        return options, argument_key

    def singleton_lock(self) -> Tuple[LockOptions, ArgumentKey]:
        """This task's resolved options and key function (resolved once per app)."""
        resolved = type(self).__dict__.get("_singleton_lock_resolved")
        if resolved is None or resolved[0] is not self.app:
            return type(self)._resolve_singleton_lock(self.app)
        return resolved[1], resolved[2]

    def lock_digest(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
        """The argument digest naming this call's lock."""
        return self.singleton_lock()[1](args or (), kwargs or {})

    @property
    def lock(self) -> Optional[ExecutionLock]:
        """The lock held by the current execution (``None`` when it holds none)."""
        return current_lock(self.request)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        request = self.request
        if request.called_directly:
            # A plain function call (``task(x)``) is not a task execution: no lock, as in Celery.
            return super().__call__(*args, **kwargs)
        if in_own_execution(request):
            # The body calling its own task as a function (``return foo(i - 1)``): a plain call too.
            with lock_hidden(request):
                return super().__call__(*args, **kwargs)
        if super(LockedTask, type(self)).__call__ is Task.__call__:
            # Celery's tracer has pushed this task and its request already. Celery's own
            # Task.__call__ would push another on top, which before Celery 5.5 is a fresh one:
            # the body would see no request id and no self.lock. So the body runs as is.
            return run_guarded(self, args, kwargs, lambda: self.run(*args, **kwargs))
        # A mixin's __call__ (an app context, say) still wraps the body.
        return run_guarded(self, args, kwargs, lambda: super(LockedTask, self).__call__(*args, **kwargs))

    def apply_async(self, args: Any = None, kwargs: Any = None, task_id: Optional[str] = None,
                    producer: Any = None, link: Any = None, link_error: Any = None, shadow: Any = None,
                    **options: Any) -> Any:
        """Publish; a ``queued*`` task first takes its enqueue lock (see :mod:`.enqueue`)."""
        check_call_shape(args, kwargs)
        sending = (args, kwargs, producer, link, link_error, shadow, options)
        if not supersede.stamps(self, task_id, options.get("headers")):
            return _send(self, sending, task_id, {}, None)
        # on_locked="replace" / lock_debounce: this call becomes its key's newest (see .supersede)
        call = supersede.supersede(self, args or (), kwargs or {}, task_id, options)
        result = _send(self, sending, call.task_id, call.headers, call.digest)  # raises: nothing displaced
        call.published()
        return result


def _send(task: Any, sending: tuple, task_id: Optional[str], newest: dict, digest: Optional[str]) -> Any:
    """Publish one call (``sending``: apply_async's arguments); a ``queued*`` task under its enqueue lock."""
    args, kwargs, producer, link, link_error, shadow, options = sending
    lock_options = task.singleton_lock()[0]
    if newest and not lock_options.at_enqueue:
        options["headers"] = headers.library_headers(options.get("headers"), newest)
    if not lock_options.at_enqueue or task.app.conf.task_always_eager:
        # Eager runs take the run lock inside apply(); either way, arguments without
        # a lock key are refused before anything is published (a newest call's were already).
        if digest is None:
            publish_digest(task, args or (), kwargs or {}, options.get("serializer"))
        own = task.lock if task_id is not None and task_id == task.request.id else None
        if own is not None:
            # self.retry(): the retry may start while this execution still finishes; it waits for it.
            options["headers"] = headers.library_headers(options.get("headers"), {headers.AFTER: own.token})
        return Task.apply_async(task, args, kwargs, task_id, producer, link, link_error, shadow, **options)

    def publish(publish_id: str, ours: Optional[dict]) -> Any:
        inherited = options.get("headers")
        if inherited or ours or newest:
            # Celery copies a request's headers into self.retry(): ours are set afresh.
            options["headers"] = headers.library_headers(inherited, {**newest, **(ours or {})})
        return Task.apply_async(task, args, kwargs, publish_id, producer, link, link_error, shadow, **options)

    return publish_locked(task, args or (), kwargs or {}, task_id, CallOptions(options, link), publish, digest)


def _sharing(app: Any, task: str, name: str) -> Iterator[Tuple[str, LockOptions, Optional[int]]]:
    """The tasks of ``app`` already resolved whose locks are under ``name`` (the registry as it is:
    reading ``app.tasks`` would finalize the app from inside a task's binding)."""
    for other in list(getattr(app, "_tasks", {}).values()):
        resolved = type(other).__dict__.get("_singleton_lock_resolved")
        if (isinstance(other, LockedTask) and other.name != task and resolved is not None
                and resolved[0] is app and resolved[1].key_name(other.name) == name):
            yield other.name, resolved[1], resolved[2].arity


def _own_attributes(cls: type) -> Iterator[Tuple[str, Any]]:
    """Attributes set by the task's own classes (its options, a subclass's settings), without the
    methods and properties written in those classes' bodies."""
    for klass in cls.__mro__:
        if klass is LockedTask or not issubclass(klass, LockedTask):
            continue
        for name, value in vars(klass).items():
            if isinstance(value, (property, classmethod, staticmethod)):
                continue
            if inspect.isfunction(value) and value.__qualname__.startswith(f"{klass.__qualname__}."):
                continue
            yield name, value


def _class_names() -> frozenset:
    """What LockedTask and Celery's Task name themselves (``lock``, ``lock_digest``...): no typos."""
    return frozenset(dir(LockedTask))
