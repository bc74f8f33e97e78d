"""``celery locks list / show / clear / web``: what an operator sees of the locks.

- ``commands.py``: the commands; ``format.py``: how one lock reads; ``views.py``: per-task counts, ``--watch``;
  ``web.py``: ``locks web``, serving the page of :mod:`..web`.

May import: ``exceptions``, ``printable``, ``store``, ``config``, ``runtime``, ``web``; never ``run``,
``enqueue`` or ``worker``.
"""

from .commands import locks, main

__all__ = ["locks", "main"]
