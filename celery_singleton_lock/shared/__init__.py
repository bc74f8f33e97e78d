"""Shared locks: places on a named resource, taken as a block in any code (``SharedLock``).

- ``resource.py``: ``SharedLock``, what a resource is (its name, limit, window, policy) and its
  keys; ``tuning.py``: the lease and wait settings it takes from its app.
- ``hold.py``: one hold: take a place, keep it renewed while the block runs, give it back.
- ``take.py``: the ask, and what a hold does when every place is taken (``on_locked``);
  ``requeue.py``: ``"retry"``, the running task back to its queue.
- ``held.py``: the handle a block gets (``key``, ``token``, ``fencing_token``, ``lost``, ``check()``).

May import: ``exceptions``, ``signals``, ``store``, ``config``, ``metrics``, ``calls``, ``runtime``, ``run``.
"""

from .resource import SharedLock, refuse_unbound

__all__ = ["SharedLock", "refuse_unbound"]
