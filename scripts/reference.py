"""Write the site's Reference page (docs/reference.md) from the code's own option table.

The names, ``app.conf`` keys and built-in defaults are read from
``celery_singleton_lock/config/options.py`` (``_OPTIONS``, ``OPTION_NAMES``, ``SETTING_NAMES``) and
the choices from its ``SCOPES`` / ``ON_LOCKED`` / ``ON_LOCK_ERROR``; only the one-line meanings are
written here. An option or setting the code has and this file does not describe (or the reverse)
stops the script, and ``tests/unit/test_docs_reference.py`` keeps the page equal to this output:
after changing an option, run ``python scripts/reference.py --write`` and commit the page.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "reference.md"
sys.path.insert(0, str(ROOT))

from celery_singleton_lock.config import options  # noqa: E402
from celery_singleton_lock.store import MAX_LIMIT  # noqa: E402


def _choices(values: Tuple[str, ...]) -> str:
    return "one of " + ", ".join(f'`"{value}"`' for value in values)


_SECONDS = "seconds (float)"
#: option -> (type, meaning); the default comes from the code's table.
OPTIONS: Dict[str, Tuple[str, str]] = {
    "lock_key": ("`None`, a tuple of parameter names, or a callable `(*args, **kwargs) -> str`",
                 "what makes two calls the same (arguments are bound to the signature first)"),
    "lock_scope": (_choices(options.SCOPES),
                   "when the lock is held: while the body runs, from `apply_async` while queued, or from "
                   "`apply_async` until the run ends"),
    "lock_queue_ttl": (f"{_SECONDS}, at least {options.MIN_TTL}",
                       "how long an enqueue lock lives while its message waits in the queue"),
    "on_locked": (_choices(options.ON_LOCKED), "what a duplicate does"),
    "lock_ttl": (f"{_SECONDS}, at least {options.MIN_TTL}",
                 "how long a lock outlives a dead holder; a live holder's heartbeat renews it"),
    "lock_heartbeat": (f"{_SECONDS}, at least {options.MIN_PERIOD}, below `lock_ttl`",
                       "the renewal period of a held lock"),
    "lock_retry_delay": (f"{_SECONDS}, >= 0", 'the countdown of `on_locked="retry"`, with jitter'),
    "lock_retry_max": ("int >= 0 or `None`",
                       "re-queues because of the lock; they do not spend the task's `max_retries`"),
    "lock_wait_timeout": (f"{_SECONDS}, >= 0", 'how long `on_locked="wait"` blocks'),
    "on_lock_error": (_choices(options.ON_LOCK_ERROR),
                      'what happens when Redis cannot be reached: never unguarded unless `"run"`'),
    "lock_debounce": (f"{_SECONDS}, > 0, or `None`",
                      "trailing-edge debounce: the key runs once, this long after a burst's last call, with "
                      'its arguments (implies `on_locked="replace"`); `None`: no debounce'),
    "lock_debounce_max": (f"{_SECONDS}, above `lock_debounce`, or `None`",
                          "a burst that never goes quiet still runs at most this long after its first call"),
    "lock_limit": (f"int from 1 to {MAX_LIMIT:,}, or a callable of the call's arguments returning one",
                   "how many executions of one key hold it at once; 1 is the singleton lock"),
    "lock_window": (f"{_SECONDS}, >= 0",
                    "a holder's place is kept at least this long after it was taken: at most `lock_limit` "
                    "calls of a key start in any window of this length"),
    "lock_name": ("a non-empty str (no app-wide default)",
                  "the name the lock keys are made under; tasks with one `lock_name` and equal key values "
                  "share one lock"),
}
#: What an option's built-in ``None`` stands for, where it is not plainly "unset".
_NONE_MEANS = {"lock_key": "every argument", "lock_heartbeat": "`lock_ttl / 3`", "lock_name": "the task's name"}
#: app setting (not a task option's default) -> (type, default, meaning)
SETTINGS: Dict[str, Tuple[str, str, str]] = {
    "singleton_lock_url": ("a `redis://`, `rediss://`, `unix://`, `redis+cluster://` or `sentinel://` URL, "
                           "or a list of independent URLs (a quorum)", "the broker URL when it is Redis",
                           "the lock store every worker and publisher shares"),
    "singleton_lock_prefix": ("str without braces or spaces", '`"singleton_lock"`', "the prefix of every key"),
    "singleton_lock_transport_options": ("dict of redis-py options", "`{}`",
                                         "the lock store's client options (`master_name` for Sentinel)"),
    "singleton_lock_backend": ("a lock store object", "`None`",
                               "a store instead of a URL: `MemoryBackend` in unit tests"),
    "singleton_lock_metrics_port": ("int or `None`", "`None`",
                                    "the worker serves Prometheus metrics of its pool on this port"),
    "singleton_lock_metrics_registry": ("a `prometheus_client` `CollectorRegistry` or `None`", "`None`",
                                        "count into your own registry instead"),
    "singleton_lock_describe": ("bool", "`False`",
                                "store a short description of each call with its lock, for `celery locks`"),
    "singleton_lock_guard_old_keys": ("bool", "`False`",
                                      "each run also holds its key as commits before the keys by name and "
                                      "values named it, so a rolling deploy across that change runs no call "
                                      "twice (README, Upgrading)"),
}


def _default(value: Any) -> str:
    return f"`{value!r}`".replace("'", '"')


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def page() -> str:
    """The Reference page, or ``SystemExit`` naming what the code has and this file lacks."""
    option_defaults = {name: conf for name, conf in options._OPTIONS.items()}
    app_only = [name for name in options.SETTING_NAMES
                if name not in {conf_key for conf_key, _ in option_defaults.values()}]
    missing = sorted(set(options.OPTION_NAMES) ^ set(OPTIONS)) + sorted(set(app_only) ^ set(SETTINGS))
    if missing:
        raise SystemExit(f"scripts/reference.py: describe or drop {', '.join(missing)}")
    lines: List[str] = [
        "# Reference",
        "",
        "<!-- Generated by scripts/reference.py from celery_singleton_lock/config/options.py: "
        "do not edit, run `python scripts/reference.py --write`. -->",
        "",
        "## Task options",
        "",
        "Ordinary `@app.task(...)` keywords. When a task leaves one unset, the app-wide default "
        "`app.conf.singleton_lock_<name>` applies, then the built-in default. A wrong value is refused "
        "with a `ConfigurationError` when the task is defined or the worker starts.",
        "",
        "| option | type | default | app-wide default | meaning |",
        "|---|---|---|---|---|",
    ]
    for name in options.OPTION_NAMES:
        kind, meaning = OPTIONS[name]
        conf_key, default = option_defaults.get(name, ("", None))
        default_text = _NONE_MEANS.get(name, "unset") if default is None else _default(default)
        conf_text = f"`{conf_key}`" if conf_key else "none"
        lines.append(f"| `{name}` | {_cell(kind)} | {default_text} | {conf_text} | {_cell(meaning)} |")
    lines += [
        "",
        f"Every duration is a finite number of seconds of at most {options.MAX_SECONDS:,}.",
        "",
        "## App settings",
        "",
        "Set on `app.conf` (in a Django project also under Celery's namespace: "
        "`CELERY_SINGLETON_LOCK_URL`). A misspelled `singleton_lock_*` setting is refused.",
        "",
        "| setting | type | default | meaning |",
        "|---|---|---|---|",
    ]
    for name in app_only:
        kind, default_text, meaning = SETTINGS[name]
        lines.append(f"| `{name}` | {_cell(kind)} | {default_text} | {_cell(meaning)} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] == ["--write"]:
        PAGE.write_text(page(), encoding="utf-8")
    elif sys.argv[1:] == ["--check"]:
        if PAGE.read_text(encoding="utf-8") != page():
            raise SystemExit("docs/reference.md is out of date: run `python scripts/reference.py --write`")
    else:
        sys.stdout.write(page())
