"""``celery locks``: list, show and clear the locks of an app, for the operator at 3 a.m.

Registered as a Celery sub-command through the ``celery.commands`` entry point,
so it runs with the app's own configuration::

    celery -A proj locks list [--task NAME] [--json]
    celery -A proj locks show KEY [--json]
    celery -A proj locks clear KEY [--force]
    celery -A proj locks clear --task NAME --stale
    celery -A proj locks web [--bind HOST:PORT] [--allow-release] [--token TOKEN]

and the same without Celery's launcher: ``python -m celery_singleton_lock --app proj list``.

``KEY`` is a full key name, a digest, or the first characters of one (as
printed by ``list``). Locks are found with SCAN, never KEYS. ``clear`` deletes a
lock only if it still has the token that was read, and refuses a lock whose
holder is still renewing it unless ``--force`` (and says why), because deleting
a live lock lets a duplicate run beside the holder.

When the lock store cannot be used (Redis down, a wrong password, a missing ACL
permission, a wrong setting), a command prints one line, what happened, at
which URL (without its password) and what to do, and exits with status 1.
"""

from __future__ import annotations

import functools
import json
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, List, NoReturn, Optional, Sequence, TypeVar

import click
import redis
from celery.bin.base import handle_preload_options

from .format import duration, flags, show_lines, state
from .views import short_prefix, task_counts, watch
from .web import web
from ..exceptions import ConfigurationError
from ..printable import printable
from ..config.settings import resolve_settings
from ..runtime.listing import app_locks, listed, named_locks, older_key_of, public_record, store_client
from ..runtime.lock_runtime import LockRuntime, runtime_for
from ..store import LockRecord, clear_lock, end_window, error_text, find_locks, permanent_problem, redact

__all__ = ["locks", "main"]

#: Digest characters shown by ``list`` (enough to be unique; ``show``/``clear`` accept them).
SHORT_DIGEST = 12


def _runtime(ctx: click.Context) -> LockRuntime:
    app = ctx.obj.app
    settings = resolve_settings(app.conf)
    if isinstance(settings.url, tuple):
        _fail("singleton_lock_url is a list of Redis servers (a quorum lock); `locks` works on one server: "
              "run it against an app configured with one of the URLs")
    return runtime_for(app)


def _client(runtime: LockRuntime) -> Any:
    """The Redis client of the app's lock store (``locks`` reads Redis itself to list and show)."""
    client = store_client(runtime)
    if client is None:
        _fail(f"the lock store {type(runtime.store).__name__} is no Redis server: `locks` works on one")
    return client


def _fail(message: str) -> NoReturn:
    click.echo(f"locks: {message}", err=True)
    sys.exit(1)


Command = TypeVar("Command", bound=Callable[..., Any])


def _one_line_errors(command: Command) -> Command:
    """Turn a lock store that cannot be used into one line on stderr and status 1, not a traceback."""

    @functools.wraps(command)
    def run(ctx: click.Context, *args: Any, **kwargs: Any) -> Any:
        try:
            return command(ctx, *args, **kwargs)
        except ConfigurationError as exc:
            _fail(f"{exc}")
        except (redis.RedisError, OSError) as exc:
            url = redact(resolve_settings(ctx.obj.app.conf).url)
            problem = permanent_problem(exc)
            if problem is not None:
                _fail(f"the lock store {url} refused the command: {problem}")
            _fail(f"cannot reach the lock store {url} ({error_text(exc)}): check that Redis runs and that this "
                  "host can reach it, or fix singleton_lock_url")

    return run  # type: ignore[return-value]


def _table(records: Sequence[LockRecord]) -> str:
    described = any(r.describe for r in records)  # singleton_lock_describe: the CALL column
    header = ("TASK", "NAME", "DIGEST", "STATE", "HOLDER TASK ID", "HOST", "PID", "AGE", "TTL LEFT", "FLAGS",
              *(("CALL",) if described else ()))
    # A task id, a host or a description is anyone's to choose: shown escaped, it cannot forge a row.
    rows = [tuple(printable(cell) for cell in (
        r.task or "-", r.name or r.task, r.digest[:SHORT_DIGEST] + (":queued" if r.kind == "queued" else ""),
        state(r), r.task_id or ("?" if r.state == "foreign" else "-"),  # no task id: a block outside a task
        r.host or "?", str(r.pid or "?"), duration(r.age_ms), duration(r.pttl_ms), flags(r),
        *((r.describe or "-",) if described else ()))) for r in records]
    widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip()
                     for row in [header, *rows])


def _holders(runtime: LockRuntime, key: str) -> List[LockRecord]:
    """The lock ``key`` names: one record, or every place of a key with a limit or a window."""
    if short_prefix(key):
        _fail(short_prefix(key))
    found = find_locks(_client(runtime), runtime.layout, key) or named_locks(_client(runtime), runtime.layout, key)
    if not found and key.startswith(f"{runtime.layout.prefix}:{{"):
        _fail(f"no lock held at {key}: it was released, or it expired (the store keeps no record of when)")
    if not found:
        _fail(f"no lock named {key!r} under prefix {runtime.layout.prefix!r} (released already, or a typo?)")
    runs = [r for r in found if not older_key_of(r)]  # a run's older key: its lock's second row
    if runs and len({r.key for r in runs}) < len({r.key for r in found}):
        found = runs
    keys = sorted({r.key for r in found})
    if len(keys) > 1 or (len(found) > 1 and found[0].limit is None):
        _fail(f"{key!r} names {len(keys)} locks; give more characters or the full key:\n"
              + "\n".join(f"  {printable(k)}" for k in keys))
    return found


def _scan(ctx: click.Context, runtime: LockRuntime, task: Optional[str]) -> Iterator[LockRecord]:
    """The locks of ``task`` (every lock when ``None``), as :func:`~..runtime.listing.app_locks` finds them."""
    return app_locks(ctx.obj.app, runtime, _client(runtime), task)


# -- the commands -----------------------------------------------------------------------------------
@click.group(name="locks")
@click.pass_context
@handle_preload_options
def locks(ctx: click.Context) -> None:
    """Inspect and clear celery-singleton-lock locks (SCAN only; clear by token)."""


@locks.command(name="list")
@click.option("--task", "task", default=None,
              help="Only the locks this task made, or those under this lock name (lock_name, a SharedLock).")
@click.option("--json", "as_json", is_flag=True, help="One JSON array, for scripts.")
@click.option("--watch", "every", type=click.FloatRange(min=0.1), default=None, is_flag=False, flag_value=2.0,
              help="Refresh every N seconds (2 when N is left out), like top, until Ctrl-C.")
@click.pass_context
@_one_line_errors
def list_(ctx: click.Context, task: Optional[str], as_json: bool, every: Optional[float]) -> None:
    """List held locks: task, key digest, holder task id, host, pid, age, TTL left, stale/lost flags;
    then how many each task holds."""
    runtime = _runtime(ctx)
    if as_json and every is not None:
        raise click.UsageError("--watch redraws the table; --json is for scripts: use one of them")

    def render() -> str:
        records: List[LockRecord] = listed(ctx.obj.app, runtime, _client(runtime), task)
        if as_json:
            return json.dumps([public_record(r) for r in records], indent=2)
        if records:
            return f"{_table(records)}\n\n{task_counts(records)}"
        return f"no locks held under prefix {runtime.layout.prefix!r}" + (f" for task {task}" if task else "")

    if every is None:
        click.echo(render())
    else:
        watch(render, every, click.echo)


@locks.command()
@click.argument("key")
@click.option("--json", "as_json", is_flag=True, help="Every field as JSON, token included.")
@click.pass_context
@_one_line_errors
def show(ctx: click.Context, key: str, as_json: bool) -> None:
    """Show one lock (full key, digest, or its first characters; or a lock name or task holding one
    lock) and why it is live, stale or lost;
    for a key with a limit or a window, every place (``k of N``; ``--json``: a list of them)."""
    found = _holders(_runtime(ctx), key)
    if as_json:
        data = [public_record(r, with_token=True) for r in found]
        click.echo(json.dumps(data if found[0].limit is not None else data[0], indent=2))
        return
    for n, record in enumerate(found, 1):
        if record.limit is not None:
            click.echo(f"{'' if n == 1 else chr(10)}place {n} of {len(found)} listed "
                       f"({record.held} of {record.limit} taken)")
        click.echo("\n".join(show_lines(record)))


@locks.command()
@click.argument("key", required=False)
@click.option("--task", "task", default=None, help="With --stale: only this task's locks.")
@click.option("--stale", is_flag=True, help="Clear every stale or lost lock (holder not renewing).")
@click.option("--force", is_flag=True, help="Clear KEY even though its holder still renews it; on a key with a window, end the window too.")
@click.pass_context
@_one_line_errors
def clear(ctx: click.Context, key: Optional[str], task: Optional[str], stale: bool, force: bool) -> None:
    """Delete a lock by token: KEY, or every stale one with --stale [--task NAME].

    A lock whose holder still renews it is refused unless --force: its task is
    running, and clearing the lock lets a duplicate run beside it.
    """
    if key is None and not stale:
        raise click.UsageError("give a KEY, or --stale (with --task NAME to limit it to one task)")
    if stale and force:
        raise click.UsageError("--stale clears only locks nobody renews; --force is for one KEY")
    if key is not None and task is not None:
        raise click.UsageError("--task filters --stale; a KEY already names its task")
    runtime = _runtime(ctx)
    if key is not None:
        # A key with places: each holder by its own token and rules (a released place is its window's)
        found = _holders(runtime, key)
        results = [clear_lock(runtime.store, record, force=force) for record in found if record.state != "released"]
        for result in results:
            click.echo(printable(result.message), err=not result.cleared)
        if force and found[0].limit is not None and all(r.cleared for r in results):
            # --force ends the window too: the places it keeps go, and calls may start at once
            dropped = end_window(_client(runtime), found[0].key)
            click.echo(f"ended the window of {printable(found[0].key)}: {dropped} place(s) it kept are free now")
            sys.exit(0)
        if not results:
            click.echo(f"{key}: every place is released; only its window keeps them (pass --force to end the "
                       "window)", err=True)
        sys.exit(0 if results and all(r.cleared for r in results) else 1)
    cleared = kept = 0
    for record in _scan(ctx, runtime, task):
        if record.live:
            kept += 1
            continue
        result = clear_lock(runtime.store, record)
        cleared += result.cleared
        click.echo(printable(result.message))
    scope = f"task {task}" if task else f"prefix {runtime.layout.prefix!r}"
    click.echo(f"cleared {cleared} stale lock(s) of {scope}; left {kept} live lock(s) alone")


locks.add_command(web)


# -- ``python -m celery_singleton_lock`` --------------------------------------------------------------
@dataclass
class _Standalone:
    """What the commands need from Celery's CLI context when Celery's launcher is not used."""

    app: Any


@click.group(name="python -m celery_singleton_lock")
@click.option("-A", "--app", "app_name", envvar="CELERY_APP", default=None,
              help="The Celery app, as for celery -A (module or module:attribute).")
@click.pass_context
def main(ctx: click.Context, app_name: Optional[str]) -> None:
    """Inspect and clear celery-singleton-lock locks of a Celery app."""
    from celery import current_app
    from celery.app.utils import find_app

    if "" not in sys.path:
        sys.path.insert(0, "")  # like `celery -A`: the app module is looked up from the working directory
    ctx.obj = _Standalone(app=find_app(app_name) if app_name else current_app)


for _command in (list_, show, clear, web):
    main.add_command(_command)
del _command
