"""`tether lsp`: pygls is loaded only by it, its absence is one clear line, and the server
ends cleanly when the client says shutdown and exit."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SOURCE = str(Path(__file__).resolve().parents[2] / "src")


def env_with(*front: str) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([*front, SOURCE, env.get("PYTHONPATH", "")])
    return env


def test_without_pygls_the_command_names_the_extra_and_exits_2(tmp_path: Path) -> None:
    """A Python without pygls (here: a pygls that cannot be imported) gets one line naming
    `pip install 'tether[lsp]'` and exit code 2, no traceback."""
    fake = tmp_path / "pygls"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'pygls'\", name='pygls')\n")
    result = subprocess.run([sys.executable, "-m", "tether", "lsp"], capture_output=True,
                            text=True, env=env_with(str(tmp_path)), timeout=300,
                            stdin=subprocess.DEVNULL)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert "pip install 'tether[lsp]'" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""


def test_the_cli_does_not_import_pygls_for_other_commands() -> None:
    """Loading the command group (every command registered) and running one leaves pygls
    and lsprotocol unimported: only `tether lsp` pays for them."""
    code = ("import sys\nfrom tether.cli.main import main\nmain(['explain', 'E301'])\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('pygls', 'lsprotocol', 'tether.lsp')))\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            env=env_with(), timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def _message(payload: dict[str, object]) -> bytes:
    body = json.dumps(payload).encode()
    return f"Content-Length: {len(body)}\r\n\r\n".encode() + body


def test_the_server_exits_0_after_shutdown_and_1_without() -> None:
    """Raw JSON-RPC over stdio: initialize, shutdown, exit -> exit code 0 and nothing on
    stderr; exit without shutdown -> 1 (as the protocol asks)."""
    initialize = _message({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                           "params": {"processId": None, "rootUri": None,
                                      "capabilities": {}}})
    shutdown = _message({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    exit_ = _message({"jsonrpc": "2.0", "method": "exit"})
    for messages, code in (((initialize, shutdown, exit_), 0), ((initialize, exit_), 1)):
        result = subprocess.run([sys.executable, "-m", "tether", "lsp"],
                                input=b"".join(messages), capture_output=True,
                                env=env_with(), timeout=300)
        assert result.returncode == code, result.stderr
        assert b'"capabilities"' in result.stdout
        assert b"Traceback" not in result.stderr and b"internal error" not in result.stderr
