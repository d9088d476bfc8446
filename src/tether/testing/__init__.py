"""Testing helpers users can use for their own offline tests.

:class:`ScriptedModelServer` is a real HTTP server on 127.0.0.1 that speaks OpenAI's and
Anthropic's wire protocols, answers with scripted replies (text, tool calls, errors, delays),
and enforces the providers' history rules the way the real APIs do, so a history the real
API would refuse fails against it too. ``python -m tether.testing serve --script FILE`` runs
one in its own process; :class:`ScriptedServerClient` reads its state from another.
"""

from __future__ import annotations

from tether.testing.client import ScriptedServerClient, ServerState
from tether.testing.script import (
    RecordedRequest,
    Responder,
    ScriptedError,
    ScriptedReply,
    ScriptedToolCall,
    ScriptError,
    Step,
    load_script,
)
from tether.testing.server import ScriptedModelServer

__all__ = [
    "RecordedRequest",
    "Responder",
    "ScriptError",
    "ScriptedError",
    "ScriptedModelServer",
    "ScriptedReply",
    "ScriptedServerClient",
    "ScriptedToolCall",
    "ServerState",
    "Step",
    "load_script",
]
