"""What the process's metrics count, exactly: a run's nodes by kind and outcome, runs
started and finished, agent tokens by model (a real scripted model server), lease losses."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from tether.observability import observer
from tether.observability.metrics import Metrics
from tether.runtime.runner import Runner
from tether.stores.open import open_checkpointer
from tether.testing import ScriptedModelServer, ScriptedReply, ScriptedToolCall


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Iterator[CollectorRegistry]:
    registry = CollectorRegistry()
    monkeypatch.setattr(observer, "SINK", Metrics(registry))
    yield registry


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    found = registry.get_sample_value(name, labels)
    return 0.0 if found is None else found


def _tasks() -> dict[str, object]:
    def boom() -> None:
        raise RuntimeError("no")

    def double(x: int) -> int:
        """Double a number.

        Args:
            x: The number.
        """
        return 2 * x

    return {"t.boom": boom, "t.double": double}


def _write(tmp_path: Path, doc: dict[str, object]) -> Path:
    path = tmp_path / "flow.yaml"
    path.write_text(yaml.safe_dump({"tether": 1, **doc}, sort_keys=False), encoding="utf-8")
    return path


def test_nodes_are_counted_by_kind_and_outcome_and_runs_by_status(
        tmp_path: Path, counted: CollectorRegistry) -> None:
    flow = _write(tmp_path, {"name": "mixed", "inputs": {"go": {"type": "boolean",
                                                                "default": False}},
                             "nodes": {
        "fan": {"for_each": [1, 2, 3], "task": "t.double", "with": {"x": "{{ item }}"}},
        "never": {"task": "t.double", "with": {"x": 1}, "when": "{{ inputs.go }}"},
        "bad": {"needs": ["fan"], "task": "t.boom",
                "retry": {"max_attempts": 2, "backoff": "1ms"}},
        "after": {"needs": ["bad"], "task": "t.double", "with": {"x": 1}}}})
    store = open_checkpointer(f"sqlite:///{tmp_path / 'tether.db'}")
    try:
        result = Runner(flow, store, _tasks()).run()
    finally:
        store.close()
    assert result.status == "failed"
    labels = {"workflow": "mixed", "kind": "task"}
    assert _value(counted, "tether_node_attempts_total", status="completed", **labels) == 3
    assert _value(counted, "tether_node_attempts_total", status="skipped", **labels) == 1
    assert _value(counted, "tether_node_attempts_total", status="failed", **labels) == 1
    assert _value(counted, "tether_node_attempts_total", status="upstream_failed",
                  **labels) == 1
    assert _value(counted, "tether_node_duration_seconds_count", status="completed",
                  **labels) == 3
    assert _value(counted, "tether_node_duration_seconds_count", status="skipped",
                  **labels) == 0  # a node that did not run is counted, not timed
    assert _value(counted, "tether_runs_started_total", workflow="mixed") == 1
    assert _value(counted, "tether_runs_finished_total", workflow="mixed",
                  status="failed") == 1


def test_an_approval_pause_is_no_finished_run_and_its_resume_no_new_start(
        tmp_path: Path, counted: CollectorRegistry) -> None:
    flow = _write(tmp_path, {"name": "asks", "nodes": {"ok": {"approval": {
        "reason": "check", "form": {"approved": {"type": "boolean"}}}}}})
    store = open_checkpointer(f"sqlite:///{tmp_path / 'tether.db'}")
    try:
        paused = Runner(flow, store, {}).run()
        assert paused.status == "paused"
        assert _value(counted, "tether_runs_finished_total", workflow="asks",
                      status="paused") == 0
        done = Runner(flow, store, {}).resume(paused.execution_id, {"approved": True})
    finally:
        store.close()
    assert done.status == "completed"
    assert _value(counted, "tether_runs_started_total", workflow="asks") == 1
    assert _value(counted, "tether_runs_finished_total", workflow="asks",
                  status="completed") == 1
    assert _value(counted, "tether_node_attempts_total", workflow="asks", kind="approval",
                  status="interrupted") == 1
    assert _value(counted, "tether_node_attempts_total", workflow="asks", kind="approval",
                  status="completed") == 1


def test_agent_tokens_are_counted_by_model_and_type(
        tmp_path: Path, counted: CollectorRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-0123456789")
    with ScriptedModelServer() as server:
        server.add_replies([
            ScriptedReply(text="Doubling.", tool_calls=(
                ScriptedToolCall(name="t_double", arguments={"x": 21}),),
                usage={"input_tokens": 100, "output_tokens": 20}),
            ScriptedReply(text="42", usage={"input_tokens": 150, "output_tokens": 5})])
        flow = _write(tmp_path, {"name": "agentic", "nodes": {"helper": {"agent": {
            "model": {"provider": "openai", "name": "test-model",
                      "base_url": server.openai_base_url},
            "max_turns": 4, "prompt": "Double 21", "tools": ["t.double"]}}}})
        result = Runner(flow, None, _tasks()).run()
    assert result.status == "completed", result
    assert _value(counted, "tether_agent_tokens_total", model="test-model",
                  type="input") == 250
    assert _value(counted, "tether_agent_tokens_total", model="test-model",
                  type="output") == 25
    assert _value(counted, "tether_node_attempts_total", workflow="agentic", kind="agent",
                  status="completed") == 1
