"""The least-privilege ACL user of ``docs/security.md``, read from the doc and applied to real servers.

The doc's lines are the single source: tests apply exactly what an operator
would paste (with the test prefix and a test password), and read Redis's own
``ACL LOG`` to learn which command, if any, a user was refused.
"""

from __future__ import annotations

import os
import re
import secrets
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Sequence, Tuple

import redis

from tests.support.servers import RedisServer, redis_server_version

__all__ = ["DOC_PATH", "DocumentedAcl", "documented_acl", "AclServer", "acl_denials", "require_redis_7",
           "TOLERATED_DENIALS", "Unsupported"]

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DOC_PATH = os.path.join(_ROOT, "docs", "security.md")

#: The prefix the documented line is written for (the library's default).
DOC_PREFIX = "singleton_lock"

#: Commands redis-py sends on connect and gives up on quietly when refused (Redis 7.2+ knows them).
TOLERATED_DENIALS = ("client|setinfo",)

_LINE = re.compile(r"^ACL SETUSER (\S+) (.+)$")
_COMMAND = re.compile(r"^\+([a-z]+(\|[a-z-]+)?)$")


class Unsupported(Exception):
    """The machine's redis-server cannot run this test (too old, or built without a feature)."""


@dataclass(frozen=True)
class DocumentedAcl:
    """The base line (``reset on >password ~prefix:* &prefix:* +command...``) and the other documented lines,
    each by the name its ``# name: why`` comment gives it: additions to the base user (``+command...``),
    or another user's line (a sentinel's)."""

    user: str
    commands: Tuple[str, ...]
    additions: Dict[str, Tuple[str, ...]] = field(default_factory=dict)
    others: Dict[str, Tuple[str, Tuple[str, ...]]] = field(default_factory=dict)

    def setuser_args(self, prefix: str, password: str, without: Iterable[str] = (),
                     plus: Sequence[str] = ()) -> List[str]:
        """``ACL SETUSER`` arguments for ``prefix``: the documented commands less ``without``, plus ``plus``."""
        dropped = set(without)
        commands = [c for c in self.commands if c not in dropped] + list(plus)
        return [self.user, "reset", "on", f">{password}", f"~{prefix}:*", f"&{prefix}:*",
                *(f"+{c}" for c in commands)]

    def other_args(self, name: str, password: str) -> List[str]:
        """``ACL SETUSER`` arguments of another documented user, with ``password``."""
        user, commands = self.others[name]
        return [user, "reset", "on", f">{password}", *(f"+{c}" for c in commands)]


def _commands(tokens: Sequence[str], line: str) -> Tuple[str, ...]:
    commands = []
    for token in tokens:
        found = _COMMAND.match(token)
        if not found:
            raise AssertionError(f"docs/security.md: {token!r} in {line!r} is not a single +command "
                                 "(no categories, no patterns beyond the prefix)")
        commands.append(found.group(1))
    if len(set(commands)) != len(commands):
        raise AssertionError(f"docs/security.md: a command appears twice in {line!r}")
    return tuple(commands)


def documented_acl(path: str = DOC_PATH) -> DocumentedAcl:
    """Parse every ``ACL SETUSER`` line of the doc, each named by the ``# name: why`` comment above it."""
    with open(path) as handle:
        lines = [line.rstrip() for line in handle]
    base = None
    additions: Dict[str, Tuple[str, ...]] = {}
    others: Dict[str, Tuple[str, Tuple[str, ...]]] = {}
    for index, line in enumerate(lines):
        found = _LINE.match(line)
        if not found:
            continue
        label = lines[index - 1] if index else ""
        if not label.startswith("# ") or ":" not in label:
            raise AssertionError(f"docs/security.md: {line!r} needs a '# name: why' line above it")
        name = label[2:].split(":", 1)[0].strip()
        if name in additions or name in others:
            raise AssertionError(f"docs/security.md: {name!r} names two lines")
        user, tokens = found.group(1), found.group(2).split()
        if tokens[0] != "reset":
            additions[name] = _commands(tokens, line)
            continue
        if tokens[:2] != ["reset", "on"] or not tokens[2].startswith(">"):
            raise AssertionError(f"docs/security.md: a user's line starts 'reset on >password': {line!r}")
        if any(token.startswith("~") for token in tokens):
            expected = [f"~{DOC_PREFIX}:*", f"&{DOC_PREFIX}:*"]
            if tokens[3:5] != expected or base is not None:
                raise AssertionError(f"docs/security.md: one line grants keys and channels, and only "
                                     f"{' '.join(expected)}: {line!r}")
            base = (user, _commands(tokens[5:], line))
        else:
            others[name] = (user, _commands(tokens[3:], line))
    if base is None:
        raise AssertionError("docs/security.md has no 'ACL SETUSER <user> reset on >... ~prefix:* ...' line")
    return DocumentedAcl(user=base[0], commands=base[1], additions=additions, others=others)


def acl_denials(client: redis.Redis, user: str) -> List[str]:
    """``ACL LOG`` entries of ``user`` as ``"reason object (context)"``, e.g. ``"command hset (lua)"``."""
    found = []
    for entry in client.execute_command("ACL", "LOG"):
        entry = dict(zip(entry[::2], entry[1::2])) if isinstance(entry, list) else entry
        entry = {_text(k): _text(v) for k, v in entry.items()}
        if entry.get("username") != user or entry.get("object") in TOLERATED_DENIALS:
            continue
        found.append(f"{entry.get('reason')} {entry.get('object')} ({entry.get('context')})")
    return found


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def require_redis_7() -> None:
    """Raise :class:`Unsupported` unless the tests' redis-server is Redis 7 or later (what the doc is for)."""
    version = redis_server_version()
    if version < (7,):
        raise Unsupported(f"redis-server {'.'.join(map(str, version)) or '(unknown version)'} is older than 7; "
                          "the documented ACL lines are for Redis 7 (subcommands, channel patterns)")


class AclServer:
    """A Redis 7 whose default user has a password (the admin) and whose lock user is what the test applies."""

    def __init__(self, **server_args: Any) -> None:
        self.admin_password = secrets.token_hex(8)
        self.password = secrets.token_hex(8)
        self.server = RedisServer(extra_args=["--requirepass", self.admin_password], **server_args)
        self.user = ""

    def start(self) -> "AclServer":
        require_redis_7()
        self.server.start(probe_url=self.admin_url())
        return self

    def stop(self) -> None:
        self.server.__exit__()

    def admin_url(self, db: int = 0) -> str:
        scheme, rest = self.server.url.split("://", 1)
        return f"{scheme}://default:{self.admin_password}@{rest}/{db}"

    def user_url(self, db: int = 0) -> str:
        scheme, rest = self.server.url.split("://", 1)
        return f"{scheme}://{self.user}:{self.password}@{rest}/{db}"

    def admin(self, db: int = 0) -> redis.Redis:
        return redis.Redis.from_url(self.admin_url(db), decode_responses=True)

    def apply(self, args: Sequence[str]) -> None:
        """``ACL SETUSER`` as an operator runs it; also drop cached scripts and old log entries."""
        admin = self.admin()
        try:
            admin.execute_command("ACL", "SETUSER", *args)
            self.user = args[0]
            admin.execute_command("ACL", "LOG", "RESET")
            admin.script_flush()
        finally:
            admin.close()

    def denials(self) -> List[str]:
        """What Redis refused the lock user since :meth:`apply` (see :func:`acl_denials`)."""
        admin = self.admin()
        try:
            return acl_denials(admin, self.user)
        finally:
            admin.close()

    def __enter__(self) -> "AclServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
