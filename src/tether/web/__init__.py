"""``tether serve``: the approvals inbox and runs console, with a JSON API (``tether[web]``).

:func:`create_app` builds the FastAPI app for a :class:`ServeConfig`; :func:`serve` runs it
with uvicorn. The pages and the API are thin: every operation is a
:class:`~tether.web.console.Console` call over the same store the runs use.
"""

from __future__ import annotations

from tether.web.app import create_app
from tether.web.config import AuthMode, ConfigError, Role, ServeConfig, User
from tether.web.server import serve

__all__ = ["AuthMode", "ConfigError", "Role", "ServeConfig", "User", "create_app", "serve"]
