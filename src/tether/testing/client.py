"""Reading a scripted model server's state from another process (a crash test's driver)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from tether.testing.script import RecordedRequest, Step, step_to_data
from tether.testing.server import DEFAULT_WAIT


@dataclass(frozen=True)
class ServerState:
    """Where a scripted model server's script stands."""

    position: int
    remaining: int
    requests: int


class ScriptedServerClient:
    """The ``/_tether/*`` endpoints of a scripted model server at ``url``
    (``http://127.0.0.1:PORT``)."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def requests(self, wait_for: int = 0, timeout: float = DEFAULT_WAIT
                 ) -> tuple[RecordedRequest, ...]:
        """Every request the server received, once at least ``wait_for`` have arrived (or
        ``timeout`` seconds passed)."""
        data = self._call(f"/_tether/requests?wait_for={wait_for}&timeout={timeout:g}",
                          timeout=timeout + 5)
        return tuple(RecordedRequest.from_data(item) for item in data["requests"])

    def state(self) -> ServerState:
        """The script position, the steps left and the number of requests received."""
        data = self._call("/_tether/state")
        return ServerState(data["position"], data["remaining"], data["requests"])

    def add_replies(self, steps: Iterable[Step]) -> ServerState:
        """Queue more steps on the server's script."""
        body = json.dumps({"replies": [step_to_data(step) for step in steps]}).encode()
        data = self._call("/_tether/replies", body=body)
        return ServerState(data["position"], data["remaining"], data["requests"])

    def _call(self, path: str, body: bytes | None = None, timeout: float = DEFAULT_WAIT
              ) -> dict[str, Any]:
        request = urllib.request.Request(self.url + path, data=body,
                                         headers={"content-type": "application/json"})
        with urllib.request.urlopen(request, timeout=timeout) as response:
            result: dict[str, Any] = json.loads(response.read())
        return result
