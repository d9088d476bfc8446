"""The language server's latency: fresh diagnostics after an edit of a 1,000-node file.

Run: .venv/bin/python bench/lsp_latency.py [--nodes 1000] [--edits 40]
Starts `python -m tether lsp` (the tree's sources first on PYTHONPATH) and talks JSON-RPC to it
over stdio, as an editor does: opens a generated workflow (YAML, then .flow), then sends
incremental edits that alternately break a `needs` entry (E301) and repair it, and measures
from sending each `didChange` to receiving the `publishDiagnostics` of that version. Prints
the median, 90th percentile and maximum per syntax (target: median under 100 ms), the
server's CPU per edit, and the time from the last of a burst of edits sent back to back (as
fast typing sends them) to the diagnostics of the final text.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, BinaryIO

sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate import workflow_flow, workflow_yaml

SOURCE = Path(__file__).resolve().parents[1] / "src"


class Server:
    """A language server process and a thread reading its messages into a queue."""

    def __init__(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SOURCE), env.get("PYTHONPATH"))
                                            if p)
        self.process = subprocess.Popen([sys.executable, "-m", "tether", "lsp"],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        env=env)
        self.messages: queue.Queue[dict[str, Any]] = queue.Queue()
        assert self.process.stdout is not None
        threading.Thread(target=self._read, args=(self.process.stdout,), daemon=True).start()
        self.next_id = 0

    def _read(self, stream: BinaryIO) -> None:
        while True:
            length = 0
            while (line := stream.readline().strip()):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if not length:
                return
            self.messages.put(json.loads(stream.read(length)))

    def send(self, method: str, params: Any, request: bool = False) -> int | None:
        payload: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
        if request:
            self.next_id += 1
            payload["id"] = self.next_id
        body = json.dumps(payload).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.process.stdin.flush()
        return payload.get("id")

    def wait(self, match: Any) -> dict[str, Any]:
        while True:
            message = self.messages.get(timeout=300)
            if match(message):
                return message

    def stop(self) -> None:
        ident = self.send("shutdown", None, request=True)
        self.wait(lambda m: m.get("id") == ident)
        self.send("exit", None)
        self.process.wait(timeout=60)


def published(uri: str, version: int | None) -> Any:
    return lambda m: (m.get("method") == "textDocument/publishDiagnostics"
                      and m["params"]["uri"] == uri
                      and (version is None or m["params"].get("version") == version))


def needs_entry(lines: list[str], node: str, needed: str) -> tuple[int, int]:
    """Line and column of ``needed`` in the needs (``after``) of ``node``."""
    found = re.compile(rf"(?<![.\w]){needed}\b(?!\.)")
    start = next(i for i, line in enumerate(lines) if re.search(rf"\b{node}\b", line))
    for index in range(start, len(lines)):
        match = found.search(lines[index])
        if match:
            return index, match.start()
    raise LookupError(f"{node} does not need {needed}")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (Linux: /proc/<pid>/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(server: Server, path: Path, text: str, edits: int) -> tuple[list[float], float]:
    """Seconds from each edit to its diagnostics, and the server's CPU seconds per edit (a
    figure a loaded machine does not inflate as much as wall time)."""
    uri = path.resolve().as_uri()
    language = "flow" if path.suffix == ".flow" else "yaml"
    server.send("textDocument/didOpen", {"textDocument": {
        "uri": uri, "languageId": language, "version": 1, "text": text}})
    server.wait(published(uri, 1))
    lines = text.split("\n")
    target, column = needs_entry(lines, "n500", "n499")
    times = []
    cpu = cpu_seconds(server.process.pid)
    for edit in range(edits):
        version = edit + 2
        change = {"range": {"start": {"line": target, "character": column},
                            "end": {"line": target, "character": column + 4}},
                  "text": "n4x9" if edit % 2 == 0 else "n499"}
        start = time.perf_counter()
        server.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [change]})
        message = server.wait(published(uri, version))
        times.append(time.perf_counter() - start)
        broken = any(d["code"] == "E301" for d in message["params"]["diagnostics"])
        assert broken == (edit % 2 == 0), message
    return times, (cpu_seconds(server.process.pid) - cpu) / edits


def burst(server: Server, path: Path, target: int, column: int, first: int,
          size: int, final: str) -> float:
    """Seconds from the last of ``size`` edits sent back to back (as fast typing does) to
    the diagnostics of the final text (the needs entry spelt ``final``, a new text each
    time: diagnostics of a text already published are not sent again); versions start
    after ``first``."""
    uri = path.resolve().as_uri()
    for step in range(size):
        change = {"range": {"start": {"line": target, "character": column},
                            "end": {"line": target, "character": column + 4}},
                  "text": final if step == size - 1 else "n4x9" if step % 2 == 0 else "n499"}
        if step == size - 1:
            start = time.perf_counter()
        server.send("textDocument/didChange", {
            "textDocument": {"uri": uri, "version": first + step + 1},
            "contentChanges": [change]})
    server.wait(published(uri, first + size))
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--edits", type=int, default=40)
    parser.add_argument("--burst", type=int, default=10,
                        help="edits sent back to back, five times (default 10)")
    args = parser.parse_args()
    server = Server()
    server.send("initialize", {"processId": None, "rootUri": None, "capabilities": {}},
                request=True)
    server.wait(lambda m: m.get("id") == 1)
    server.send("initialized", {})
    with tempfile.TemporaryDirectory() as directory:
        for name, text in (("big.yaml", workflow_yaml(args.nodes)),
                           ("big.flow", workflow_flow(args.nodes))):
            times, cpu = run(server, Path(directory) / name, text, args.edits)
            target, column = needs_entry(text.split("\n"), "n500", "n499")
            bursts = [burst(server, Path(directory) / name, target, column,
                            args.edits + 1 + i * args.burst, args.burst, f"n4{'abcde'[i]}9")
                      for i in range(5)]
            times.sort()
            p90 = times[int(len(times) * 0.9) - 1]
            print(f"{name} ({args.nodes} nodes, {args.edits} edits): median "
                  f"{statistics.median(times) * 1000:.1f} ms, p90 {p90 * 1000:.1f} ms, "
                  f"max {times[-1] * 1000:.1f} ms; server CPU {cpu * 1000:.1f} ms per edit; "
                  f"after a burst of {args.burst} edits: median "
                  f"{statistics.median(bursts) * 1000:.1f} ms")
    print(f"load average: {os.getloadavg()[0]:.1f}")
    server.stop()


if __name__ == "__main__":
    main()
