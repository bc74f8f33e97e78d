"""``celery locks list / show / clear``: what an operator sees of the locks.

- ``commands.py``: the commands; ``format.py``: how one lock reads; ``views.py``: per-task counts, ``--watch``.

May import: ``exceptions``, ``printable``, ``store``, ``config``, ``runtime``; never ``run``,
``enqueue`` or ``worker``.
"""

from .commands import locks, main

__all__ = ["locks", "main"]
