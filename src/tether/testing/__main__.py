"""``python -m tether.testing serve --script FILE [--port N]``: a scripted model server in
its own process. It prints its port on the first line of stdout, then serves until it is
terminated (SIGTERM or Ctrl-C)."""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from tether.testing.script import ScriptError, load_script
from tether.testing.server import ScriptedModelServer


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m tether.testing",
                                     description="A scripted model server for offline tests.")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve a script over HTTP on 127.0.0.1")
    serve.add_argument("--script", help="a JSON file of steps (default: an empty script)")
    serve.add_argument("--port", type=int, default=0, help="the port (default: a free one)")
    serve.add_argument("--host", default="127.0.0.1", help="the address (default: loopback)")
    args = parser.parse_args(argv)
    try:
        steps = load_script(args.script) if args.script else ()
    except ScriptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return _serve(ScriptedModelServer(steps, host=args.host, port=args.port))


def _serve(server: ScriptedModelServer) -> int:
    stop = threading.Event()

    def _stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    with server:
        print(server.port, flush=True)
        print(f"scripted model server at {server.url} (OpenAI base_url "
              f"{server.openai_base_url}, Anthropic base_url {server.anthropic_base_url})",
              file=sys.stderr, flush=True)
        stop.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
