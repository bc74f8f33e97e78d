"""What one app holds in one process: its lock store, its heartbeat, its watch over pool children.

- ``lock_runtime.py``: the per-app machinery, built lazily after the fork.
- ``childwatch.py``: the worker main process's watch over pool children that exit holding a lock.
- ``holds.py``: the shared holds a pool process notes for its main process to give back if it dies.
- ``hold_dir.py``: the directory of those notes, used only when it is this user's own.

May import: ``exceptions``, ``signals``, ``store``, ``config``, ``metrics``, ``calls``.
"""

from .lock_runtime import LockRuntime, peek_runtime, runtime_for

__all__ = ["LockRuntime", "runtime_for", "peek_runtime"]
