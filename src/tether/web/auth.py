"""Who is asking, and whether a state-changing request really comes from our own page.

Identity, in order: a bearer token (``Authorization: Bearer ...``, for integrations), else the
signed session cookie set by the login page, else, without ``--auth``, the local user (the
console then listens on loopback only). Sessions, CSRF tokens and approval links are signed
with the console key through itsdangerous (HMAC-SHA1 over a salted key derivation, with a
timestamp checked against a maximum age).

CSRF (the signed double-submit pattern): every page sets a random ``tether_csrf`` cookie
(HttpOnly, SameSite=Strict); every form carries the nonce signed with the console key, and a
POST is accepted only when the field unsigns to the cookie's nonce. Cookie-authenticated JSON
calls send the same token in ``X-CSRF-Token``; bearer-token calls need none (a browser never
adds that header by itself). Any state-changing request whose ``Origin`` names another site
is refused as well.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Literal

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer
from starlette.requests import Request

from tether.web.config import SESSION_MAX_AGE, AuthMode, Role, ServeConfig, User, token_key

SESSION_COOKIE = "tether_session"
CSRF_COOKIE = "tether_csrf"
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"
CSRF_MAX_AGE = 24 * 3600

Via = Literal["token", "session", "local", "link"]


@dataclass(frozen=True)
class Identity:
    """Who a request acts for, and how we know."""

    name: str
    role: Role
    via: Via

    @property
    def may_act(self) -> bool:
        return self.role == Role.APPROVER

    @property
    def may_submit(self) -> bool:
        """Whether this identity may start runs (an approver, or a submitter)."""
        return self.role in (Role.APPROVER, Role.SUBMITTER)


class Forbidden(Exception):
    """A request refused after authentication (HTTP 403): CSRF, origin, or role."""


class Unauthenticated(Exception):
    """A request without valid credentials (HTTP 401, or the login page)."""


class Guard:
    """Authentication and CSRF checks for one console (one key, one set of users)."""

    def __init__(self, config: ServeConfig) -> None:
        self.config = config
        self._sessions = URLSafeTimedSerializer(config.secret, salt="tether-session")
        self._csrf = URLSafeTimedSerializer(config.secret, salt="tether-csrf")
        self._users_by_name = {u.name: u for u in config.users.values()}

    # -- identity ----------------------------------------------------------------------------
    def identify(self, request: Request) -> Identity | None:
        """The identity of ``request``; None when ``--auth`` is on and it has none.

        Raises :class:`Unauthenticated` for a bearer token that names nobody (a wrong token
        is an error, not an anonymous request)."""
        header = request.headers.get("authorization", "")
        if header:
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("the Authorization header must be 'Bearer <token>'")
            if self.config.auth == AuthMode.NONE:
                return self._local()
            user = self.config.users.get(token_key(token.strip()))
            if user is None:
                raise Unauthenticated("unknown token")
            return Identity(user.name, user.role, "token")
        if self.config.auth == AuthMode.NONE:
            return self._local()
        session = self.session_user(request)
        return Identity(session.name, session.role, "session") if session else None

    def _local(self) -> Identity:
        return Identity(self.config.local_user, Role.APPROVER, "local")

    def session_user(self, request: Request) -> User | None:
        cookie = request.cookies.get(SESSION_COOKIE)
        if not cookie:
            return None
        try:
            name = self._sessions.loads(cookie, max_age=SESSION_MAX_AGE)
        except (BadSignature, SignatureExpired):
            return None
        return self._users_by_name.get(name) if isinstance(name, str) else None

    def login(self, token: str) -> tuple[User, str] | None:
        """The user a token names and the session cookie value for them."""
        user = self.config.users.get(token_key(token.strip()))
        if user is None:
            return None
        return user, self._sessions.dumps(user.name)

    # -- CSRF --------------------------------------------------------------------------------
    @staticmethod
    def csrf_nonce(request: Request) -> tuple[str, bool]:
        """The request's CSRF nonce, and whether it is new (to be set as a cookie)."""
        nonce = request.cookies.get(CSRF_COOKIE, "")
        if 20 <= len(nonce) <= 100 and nonce.isascii():
            return nonce, False
        return secrets.token_urlsafe(24), True

    def csrf_token(self, nonce: str) -> str:
        return self._csrf.dumps(nonce)

    def check_csrf(self, request: Request, submitted: str | None) -> None:
        """Raise :class:`Forbidden` unless ``submitted`` is the signed nonce of the request's
        CSRF cookie (and the request's Origin, when sent, is this site)."""
        self.check_origin(request)
        nonce = request.cookies.get(CSRF_COOKIE)
        if not nonce or not submitted:
            raise Forbidden("the form has expired or did not come from this console "
                            "(missing CSRF token); reload the page and try again")
        try:
            signed = self._csrf.loads(submitted, max_age=CSRF_MAX_AGE)
        except (BadSignature, SignatureExpired):
            raise Forbidden("the form's CSRF token is invalid or expired; reload the page "
                            "and try again") from None
        if not isinstance(signed, str) or not secrets.compare_digest(signed, nonce):
            raise Forbidden("the form's CSRF token does not match this browser; reload the "
                            "page and try again")

    @staticmethod
    def check_origin(request: Request) -> None:
        origin = request.headers.get("origin")
        if origin is None:  # not sent by every browser for same-origin POSTs
            return
        host = request.headers.get("host", "")
        if origin.split("://", 1)[-1] != host:
            raise Forbidden(f"cross-site request refused (Origin {origin[:100]!r})")
