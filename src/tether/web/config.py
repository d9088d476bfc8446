"""What ``tether serve`` is configured with: the store, the address, who may sign in, where
events go, and the key everything signed (sessions, CSRF tokens, approval links) is signed
with.

Tokens come from ``TETHER_TOKENS`` (entries separated by commas or line breaks) or from a file
(``--tokens-file``, one entry a line, ``#`` starts a comment). An entry is
``NAME:TOKEN`` or ``NAME:TOKEN:ROLE``; the role is ``approver`` (the default: may answer,
resume, fork, cancel and start runs), ``viewer`` (may look) or ``submitter`` (may look and
start runs, not answer). The signing key is ``TETHER_CONSOLE_SECRET``, else the file
``--secret-file`` (default ``.tether/console.key``, created ``0600`` on first
use), so approval links stay valid across restarts and across consoles sharing the file.
"""

from __future__ import annotations

import hashlib
import ipaddress
import os
import secrets
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from tether.errors import UsageError

TOKENS_ENV = "TETHER_TOKENS"
SECRET_ENV = "TETHER_CONSOLE_SECRET"
WEBHOOK_SECRET_ENV = "TETHER_WEBHOOK_SECRET"
DEFAULT_SECRET_FILE = ".tether/console.key"
DEFAULT_LINK_MAX_AGE = 7 * 86400.0
SESSION_MAX_AGE = 12 * 3600


class ConfigError(UsageError):
    """A ``tether serve`` setting that cannot be used (a usage error: exit 2)."""


class AuthMode(StrEnum):
    """How the console knows who is asking."""

    NONE = "none"    # loopback only: everyone is the local user
    TOKEN = "token"  # bearer tokens, or a session cookie signed in with one


class Role(StrEnum):
    """What a signed-in user may do."""

    APPROVER = "approver"
    VIEWER = "viewer"
    SUBMITTER = "submitter"  # may look and start runs (POST /api/workflows/{name}/runs)


@dataclass(frozen=True)
class User:
    """A person (or a bot) the console knows by a token."""

    name: str
    role: Role = Role.APPROVER


def token_key(token: str) -> str:
    """How tokens are looked up: by their sha256, so a lookup's timing says nothing about
    the token and no token is kept in memory as given."""
    return hashlib.sha256(token.encode()).hexdigest()


def parse_tokens(text: str, where: str) -> dict[str, User]:
    """Entries ``NAME:TOKEN[:ROLE]`` (see the module docstring) by :func:`token_key`."""
    users: dict[str, User] = {}
    for number, raw in enumerate(text.replace(",", "\n").splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = [p.strip() for p in line.split(":")]
        if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
            raise ConfigError(f"{where}, entry {number}: expected NAME:TOKEN or "
                              "NAME:TOKEN:ROLE (the token itself cannot hold ':')")
        role_text = parts[2] if len(parts) == 3 else Role.APPROVER.value
        try:
            role = Role(role_text)
        except ValueError:
            raise ConfigError(f"{where}, entry {number}: role {role_text!r} is not approver, "
                              "viewer or submitter") from None
        if len(parts[1]) < 16:
            raise ConfigError(f"{where}, entry {number} ({parts[0]}): a token must be at "
                              "least 16 characters")
        key = token_key(parts[1])
        if key in users:
            raise ConfigError(f"{where}, entry {number}: the same token is given twice")
        users[key] = User(parts[0], role)
    return users


def load_tokens(tokens_file: str | None) -> dict[str, User]:
    """The users of ``TETHER_TOKENS`` and of ``tokens_file``."""
    users = parse_tokens(os.environ.get(TOKENS_ENV, ""), TOKENS_ENV)
    if tokens_file is not None:
        try:
            text = Path(tokens_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read --tokens-file {tokens_file}: {exc}") from None
        for key, user in parse_tokens(text, tokens_file).items():
            users.setdefault(key, user)
    return users


def load_secret(secret_file: str) -> bytes:
    """The signing key: ``TETHER_CONSOLE_SECRET``, else the file (made on first use)."""
    from_env = os.environ.get(SECRET_ENV, "")
    if from_env:
        if len(from_env) < 16:
            raise ConfigError(f"{SECRET_ENV} must be at least 16 characters")
        return from_env.encode()
    path = Path(secret_file)
    try:
        if path.exists():
            key = path.read_bytes().strip()
            if len(key) < 16:
                raise ConfigError(f"{path} holds fewer than 16 bytes: not a console key")
            return key
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = secrets.token_urlsafe(32).encode()
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(key + b"\n")
        return key
    except FileExistsError:  # another console made it a moment ago
        return load_secret(secret_file)
    except OSError as exc:
        raise ConfigError(f"cannot read or create the console key {path}: {exc}") from None


def is_loopback(host: str) -> bool:
    """Whether ``host`` only listens on this machine (127.0.0.0/8, ::1, localhost)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class ServeConfig:
    """Everything the console app needs; see :func:`tether.web.create_app`."""

    db: str
    secret: bytes
    host: str = "127.0.0.1"
    port: int = 8080
    auth: AuthMode = AuthMode.NONE
    users: dict[str, User] = field(default_factory=dict)
    tasks: tuple[str, ...] = ()
    worker: bool = False
    notify_url: str | None = None
    webhook_secret: bytes | None = None
    link_max_age: float = DEFAULT_LINK_MAX_AGE
    public_url: str | None = None
    local_user: str = "local"
    workflows: tuple[str, ...] = ()
    """The workflow files and directories runs may be started from (``--workflows``)."""

    def __post_init__(self) -> None:
        if self.auth == AuthMode.NONE and not is_loopback(self.host):
            raise ConfigError(f"binding {self.host} (not a loopback address) requires "
                              "authentication: add --auth token and give tokens in "
                              f"{TOKENS_ENV} or --tokens-file")
        if self.auth == AuthMode.TOKEN and not self.users:
            raise ConfigError(f"--auth token needs at least one token: set {TOKENS_ENV} "
                              "(NAME:TOKEN, comma-separated) or give --tokens-file")
        if self.notify_url is not None and not self.webhook_secret:
            raise ConfigError(f"--notify-url needs {WEBHOOK_SECRET_ENV}: every event is "
                              "signed with it (X-Tether-Signature: sha256=<hex>)")

    @property
    def base_url(self) -> str:
        """Where people reach the console (links in events): ``--public-url``, else the
        address it listens on."""
        if self.public_url:
            return self.public_url.rstrip("/")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"
