"""The scripted server as its own process (``python -m tether.testing serve``), driven by
client processes that are killed and replaced, and read from a third (this test)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from agents_support import OPENAI_KEY

from tether.agents import AssistantMessage, Conversation, ToolCall, ToolResult, UserMessage
from tether.testing import ScriptedServerClient

CLIENT = textwrap.dedent("""
    import asyncio, sys
    from tether.agents import Conversation, open_model, tool_spec

    def lookup(invoice: str) -> str:
        '''Look an invoice up.'''

    async def main(provider, url, history):
        model = open_model({"provider": provider, "name": "m", "base_url": url})
        conversation = Conversation.from_json(open(history).read())
        reply = await model.complete(system="You pay invoices.",
                                     messages=conversation.messages,
                                     tools=[tool_spec(lookup, "billing.lookup")])
        print(reply.model_dump_json(), flush=True)
        await model.aclose()

    asyncio.run(main(*sys.argv[1:]))
""")

SCRIPT = {"replies": [
    {"tool_calls": [{"name": "billing_lookup", "arguments": {"invoice": "INV-7"}}],
     "usage": {"input_tokens": 20, "output_tokens": 5}},
    {"text": "stuck", "delay": 120},
    {"text": "Paid.", "usage": {"input_tokens": 30, "output_tokens": 2}},
]}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """A server process on a free port: yields its URL and the process."""
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    process = subprocess.Popen(
        [sys.executable, "-m", "tether.testing", "serve", "--script", str(script), "--port",
         "0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None
    port = int(process.stdout.readline())
    yield f"http://127.0.0.1:{port}", process
    if process.poll() is None:
        process.kill()
    process.wait(timeout=30)


def client(provider: str, url: str, history: Path) -> subprocess.Popen[str]:
    base = url + "/v1" if provider == "openai" else url
    env = {**os.environ, "OPENAI_API_KEY": OPENAI_KEY, "ANTHROPIC_API_KEY": OPENAI_KEY}
    return subprocess.Popen([sys.executable, "-c", CLIENT, provider, base, str(history)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def finish(process: subprocess.Popen[str]) -> dict[str, object]:
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    result: dict[str, object] = json.loads(out)
    return result


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_client_killed_mid_call_is_replaced_by_another_process(
        served: tuple[str, subprocess.Popen[str]], provider: str, tmp_path: Path) -> None:
    """The script position and the recorded requests live in the server: a client SIGKILLed
    while its call is in flight is replaced by a new process that re-sends the same history
    (byte for byte) and gets the next reply."""
    url, server = served
    state = ScriptedServerClient(url)
    history = tmp_path / "history.json"
    history.write_text(Conversation([UserMessage(content="Pay INV-7.")]).to_json())

    first = finish(client(provider, url, history))
    call_id = "call_1" if provider == "openai" else "toolu_1"
    assert first["tool_calls"] == [{"id": call_id, "name": "billing_lookup",
                                    "arguments": {"invoice": "INV-7"},
                                    "invalid_arguments": None}]

    conversation = Conversation.from_json(history.read_text()).append(
        AssistantMessage(tool_calls=(ToolCall(id=call_id, name="billing_lookup",
                                              arguments={"invoice": "INV-7"}),)),
        ToolResult(call_id=call_id, tool_name="billing_lookup", content="due: 120 EUR"))
    history.write_text(conversation.to_json())
    doomed = client(provider, url, history)
    in_flight = state.requests(wait_for=2, timeout=60)
    assert len(in_flight) == 2 and in_flight[1].step == 1
    doomed.send_signal(signal.SIGKILL)
    doomed.wait(timeout=30)

    assert finish(client(provider, url, history))["text"] == "Paid."
    requests = state.requests()
    assert [(r.status, r.step) for r in requests] == [(200, 0), (200, 1), (200, 2)]
    assert json.dumps(requests[2].body) == json.dumps(requests[1].body)
    assert (state.state().position, state.state().remaining) == (3, 0)

    server.send_signal(signal.SIGTERM)
    assert server.wait(timeout=30) == 0


def test_a_bad_script_file_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text('[{"error": 99}]')
    result = subprocess.run([sys.executable, "-m", "tether.testing", "serve", "--script",
                             str(script)], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 2
    assert result.stderr.startswith('error: invalid step {"error": 99}: error: Input should '
                                    "be greater than or equal to 400")
