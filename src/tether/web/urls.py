"""The console's addresses. Execution ids may hold any printable character (``/``, ``?``,
``#``, spaces): every id in a path is percent-encoded whole, and routes read it back with
Starlette's ``path`` convertor."""

from __future__ import annotations

import re
from urllib.parse import quote

_SAFE = re.compile(r"[A-Za-z0-9_.~-]+")


def quote_id(text: str) -> str:
    """``text`` percent-encoded for one path segment (ids made by tether need nothing)."""
    return text if _SAFE.fullmatch(text) and text not in (".", "..") else quote(text, safe="")


def run_url(execution_id: str) -> str:
    return f"/runs/{quote_id(execution_id)}"


def approval_url(execution_id: str, checkpoint_id: str) -> str:
    return f"/runs/{quote_id(execution_id)}/approvals/{quote_id(checkpoint_id)}"
