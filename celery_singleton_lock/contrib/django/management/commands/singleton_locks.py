"""``python manage.py singleton_locks list|show|clear``: ``celery locks`` on the project's Celery app.

The sub-commands are the CLI's own (:mod:`celery_singleton_lock.cli.commands`): the same options,
output and exit statuses, and the same safety (``clear`` deletes by the token it read, refuses a
lock whose holder still renews it unless ``--force``, and ``--stale`` clears only locks nobody
renews)::

    python manage.py singleton_locks list [--task NAME] [--json] [--watch [N]]
    python manage.py singleton_locks show KEY [--json]
    python manage.py singleton_locks clear KEY [--force]
    python manage.py singleton_locks clear --stale [--task NAME]

The app is the project's Celery app: the current one, which ``proj/__init__.py`` imports as
Celery's Django guide sets it up.
"""

from __future__ import annotations

import argparse
from typing import Any, List

import click
from django.core.management.base import BaseCommand

from .....cli.commands import main as cli_main

#: The CLI's commands a Django project runs from ``manage.py`` (the web view has its own URLs there).
SUBCOMMANDS = ("list", "show", "clear")


def _project_app() -> None:
    """The group's set-up: the CLI's own (``python -m celery_singleton_lock``), on the current app."""
    cli_main.callback(app_name=None)  # type: ignore[misc]


def _group() -> click.Group:
    """The CLI's list, show and clear commands, on the project's Celery app."""
    return click.Group(name="manage.py singleton_locks", callback=_project_app,
                       commands={name: cli_main.commands[name] for name in SUBCOMMANDS},
                       help="Inspect and clear celery-singleton-lock locks of the project's Celery app "
                            "(SCAN only; clear by token).")


class Command(BaseCommand):
    help = "List, show and clear celery-singleton-lock locks: celery locks list|show|clear, from manage.py."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("words", nargs=argparse.REMAINDER, metavar="list|show|clear ...",
                            help="the sub-command and its options, as for celery -A proj locks")

    def handle(self, *args: Any, words: List[str], **options: Any) -> None:
        # The CLI's exit statuses are the command's: click ends the process (0, 1 for a refusal or a
        # lock store that cannot be used, 2 for a usage error).
        _group().main(args=words or ["--help"], prog_name="manage.py singleton_locks", standalone_mode=True)
