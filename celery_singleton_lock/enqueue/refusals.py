"""The error a call gets when its arguments cannot be keyed: Celery's own kind, where it has one.

An argument with no canonical form is refused before anything is locked or published
(:class:`UnencodableArgumentError`, a ``TypeError``). When the task's serializer cannot encode
it either, Celery would have refused the call with kombu's ``EncodeError``: the error is then an
:class:`UnserializableArgumentError`, both at once, so ``except EncodeError:`` still catches it.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from kombu.exceptions import EncodeError
from kombu.serialization import dumps

from ..exceptions import UnencodableArgumentError, UnserializableArgumentError

__all__ = ["serializer_refused", "publish_digest"]


def serializer_refused(error: UnencodableArgumentError) -> UnserializableArgumentError:
    """``error``, as the serializer's refusal too (the message, task and parameter kept)."""
    if isinstance(error, UnserializableArgumentError):
        return error
    refusal = UnserializableArgumentError(*error.args)
    refusal.__cause__ = error.__cause__
    return refusal


def publish_digest(task: Any, args: Sequence[Any], kwargs: Mapping[str, Any], serializer: Optional[str]) -> str:
    """The lock digest of a call about to be published with ``serializer`` (the task's when ``None``)."""
    try:
        return task.lock_digest(args, kwargs)
    except UnencodableArgumentError as error:
        try:
            dumps((list(args), dict(kwargs)), serializer=serializer or task.serializer)
        except EncodeError:
            raise serializer_refused(error) from None
        raise
