"""One execution under its lock: take it, decide what a duplicate does, hold it while the body runs, let go.

- ``guarded.py``: runs one execution; ``attempt.py``: its keys, token and asks of the store.
- ``policy.py``: the duplicate policy as one table; ``decisions.py``: the values it returns.
- ``turns.py``, ``newest.py``, ``handover.py``: holders that are no duplicate's; the newest call's claim, and
  its wait for the run it follows.
- ``requeue.py``, ``exits.py``: putting a message back; every way an execution ends.
- ``handle.py``, ``taken.py``, ``outcome.py``: ``self.lock``; what a refusal says; where it is recorded.

May import: ``exceptions``, ``signals``, ``store``, ``config``, ``calls``, ``runtime``.
"""
