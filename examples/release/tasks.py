"""Tasks of the release example: a build matrix, a channel switch, a deploy polled until done."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TypedDict

import tether


class Build(TypedDict):
    os: str
    python: str
    artifact: str


class Deploy(TypedDict):
    done: bool
    polls: int


def _ledger(entry: dict[str, object]) -> None:
    path = os.environ.get("TETHER_EXAMPLE_LEDGER")
    if path:
        with Path(path).open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")


@tether.task("release.build")
def build(os: str, python: str) -> Build:
    return {"os": os, "python": python, "artifact": f"app-{os}-py{python}.whl"}


@tether.task("release.channel")
def channel(version: str) -> str:
    return "beta" if "rc" in version else "stable"


@tether.task("release.publish")
def publish(channel: str, artifacts: list[Build], run_id: str) -> dict[str, object]:
    _ledger({"publish": channel, "artifacts": len(artifacts), "run": run_id})
    return {"channel": channel, "count": len(artifacts)}


@tether.task("release.deploy_status")
def deploy_status(channel: str) -> Deploy:
    polls = sum(1 for line in _read() if line.get("poll") == channel) + 1
    _ledger({"poll": channel})
    return {"done": polls >= 3, "polls": polls}


def _read() -> list[dict[str, object]]:
    path = os.environ.get("TETHER_EXAMPLE_LEDGER")
    if not path or not Path(path).exists():
        return []
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line]
