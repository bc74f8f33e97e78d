"""Undo a quorum acquire that failed, on every master it may have reached, also after it gave up.

An acquire that did not win a majority leaves its token on the masters that took it,
and on masters that were slow or paused it may take the lock *later*: their command
sits in the server's socket buffer and runs when the master comes back. Left there, that
lock refuses every honest caller for the whole ttl, the process that failed included.

So each master that may have seen the acquire gets a token-checked release, queued on
that master's own call queue (:mod:`.fanout`) behind the acquire: it runs after the
acquire's answer, however late. A release that itself cannot reach the master is tried
again until one is answered or the attempt's ttl has passed (then the lock it might undo
has expired too). A release sent to a paused master waits in its socket buffer behind
the acquire, on a connection opened after it, and Redis reads a connection accepted
while it was stopped only after the ones it already had: it runs after the acquire
when the master resumes.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Optional

from .errors import STORE_ERRORS, permanent_problem
from .fanout import Failed

__all__ = ["undo_call", "may_hold", "RETRY_DELAY"]

#: Pause between two tries of an unanswered release (the master is down or paused meanwhile).
RETRY_DELAY = 0.1


def undo_call(key: str, token: str, state: str, deadline: float,
              stopping: threading.Event) -> Callable[[Any], Optional[bool]]:
    """The release that undoes ``token`` on one master, tried until answered or until ``deadline``
    (``time.monotonic()``), or until the store closes (``stopping``).

    Answers the release's result, or ``None`` when no try was answered.
    """
    def undo(node: Any) -> Optional[bool]:
        while True:
            try:
                return bool(node.release(key, token, None, state))
            except STORE_ERRORS as exc:
                if permanent_problem(exc) is not None:
                    return None  # a master set up wrong refused the acquire as well
            if time.monotonic() >= deadline or stopping.wait(RETRY_DELAY):
                return None
    return undo


def may_hold(result: Any) -> bool:
    """Whether a master may hold the failed attempt's token: not when the acquire was never sent
    there, or was refused as misconfigured (a master that answered a conflict is released all the
    same: cheap and sure)."""
    return not (isinstance(result, Failed) and (not result.sent or permanent_problem(result.error) is not None))
