"""Signed approval links: one pending interrupt, for someone without a console account.

A link is ``/a/<token>``; the token is ``[execution_id, checkpoint_id, recipient]`` signed with
the console key (itsdangerous, with a timestamp): it cannot be forged or pointed at another
pause, and it expires (``--link-max-age``, default 7 days). It works once because it names one
interrupted checkpoint: the first answer claims that pause (the store's atomic claim), and
after that the link only shows who answered and when. Opening it (GET) never acts; submitting
its form (POST, with a CSRF token) does.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from datetime import UTC, datetime
from urllib.parse import quote

from itsdangerous import BadSignature, SignatureExpired, URLSafeTimedSerializer

from tether.errors import Picklable
from tether.stores.records import PendingInterrupt


class LinkError(Picklable, Exception):
    """A link that is malformed, forged, or expired (``expired`` says which)."""

    def __init__(self, message: str, *, expired: bool = False) -> None:
        super().__init__(message)
        self.expired = expired


@dataclass(frozen=True)
class Link:
    """What a valid link grants: answering one pause, as ``recipient``."""

    execution_id: str
    checkpoint_id: str
    recipient: str | None

    @property
    def resolver(self) -> str:
        return f"{self.recipient} (approval link)" if self.recipient else "approval link"


@dataclass(frozen=True)
class MintedLink:
    url: str
    expires_at: datetime


class Links:
    """Mints and reads the links of one console."""

    def __init__(self, secret: bytes, base_url: str, max_age: float) -> None:
        self._signer = URLSafeTimedSerializer(secret, salt="tether-approval-link")
        self.base_url = base_url
        self.max_age = max_age

    def mint(self, pending: PendingInterrupt, recipient: str | None = None) -> MintedLink:
        token = self._signer.dumps([pending.execution_id, pending.checkpoint_id, recipient])
        expires = datetime.fromtimestamp(time.time() + self.max_age, tz=UTC)
        return MintedLink(f"{self.base_url}/a/{quote(token, safe='')}", expires)

    def read(self, token: str) -> Link:
        try:
            data = self._signer.loads(token, max_age=int(self.max_age))
        except SignatureExpired:
            raise LinkError("this approval link has expired; ask for a new one",
                            expired=True) from None
        except BadSignature:
            raise LinkError("this is not a valid approval link") from None
        if not (isinstance(data, list) and len(data) == 3 and all(
                isinstance(v, str) for v in data[:2]) and (data[2] is None or isinstance(
                    data[2], str))):
            raise LinkError("this is not a valid approval link")
        return Link(data[0], data[1], data[2])
