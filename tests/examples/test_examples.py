"""Every example in examples/ checks clean, compiles, and runs end to end (STYLE rule 19)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import tether
from tether.runtime.registry import REGISTRY, import_tasks

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
WORKFLOWS = sorted(p for p in EXAMPLES.rglob("*") if p.suffix in (".yaml", ".flow"))
TASK_MODULES = sorted(str(p) for p in EXAMPLES.glob("*/tasks.py"))


@pytest.fixture(autouse=True)
def ledger(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "ledger.jsonl"
    monkeypatch.setenv("TETHER_EXAMPLE_LEDGER", str(path))
    return path


def run_example(workflow: str, inputs: dict[str, Any], store: tether.Checkpointer) -> Any:
    import_tasks(TASK_MODULES)
    return tether.Runner(EXAMPLES / workflow, store, REGISTRY).run(inputs)


def test_there_are_at_least_five_examples_with_two_in_flow_syntax() -> None:
    """The examples cover the five scenarios, each in YAML, at least two also in .flow."""
    folders = {p.parent.name for p in WORKFLOWS}
    assert {"refund", "review_loop", "enrichment", "fulfilment", "order", "payments"} <= folders
    assert len([p for p in WORKFLOWS if p.suffix == ".flow"]) >= 2


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_checks_clean_with_its_tasks(path: Path) -> None:
    """No diagnostic at all, with task names and arguments checked against the modules."""
    import_tasks(TASK_MODULES)
    assert tether.check([path], tasks=REGISTRY) == []


@pytest.mark.parametrize("path", [p for p in WORKFLOWS if p.suffix == ".flow"],
                         ids=lambda p: p.name)
def test_flow_example_compiles_to_the_same_plan_as_its_yaml_twin(path: Path) -> None:
    """A .flow file and the .yaml file of the same name share one fingerprint."""
    twin = path.with_suffix(".yaml")
    assert tether.compile(path).fingerprint == tether.compile(twin).fingerprint


def test_refund_pauses_for_a_manager_and_refunds_once(ledger: Path) -> None:
    """Refund above 100: pause, approve, refund exactly once, e-mail sent."""
    store = tether.InMemoryCheckpointer()
    runner = tether.Runner(EXAMPLES / "refund/refund.yaml", store, _tasks())
    paused = runner.run({"amount": 250, "account": "ACC-42"})
    assert paused.status == "paused"
    assert paused.pending_interrupt == {
        "reason": "manager_approval", "node_id": "review", "agent_path": "",
        "context": {"amount": 250, "holder": "Ada Lovelace", "balance": 1200.0},
    }
    done = runner.resume(paused.execution_id, tether.Resume(approved=True))
    assert done.status == "completed"
    assert done.output == {"refund_id": "R-ACC-42-250", "approved_by_manager": True}
    kinds = [json.loads(line)["kind"] for line in ledger.read_text().splitlines()]
    assert kinds == ["refund", "email"]


def test_refund_below_the_threshold_skips_the_approval(ledger: Path) -> None:
    """The guard is false: no pause, the refund still runs (trigger none_failed)."""
    result = run_example("refund/refund.yaml", {"amount": 50, "account": "ACC-7"},
                         tether.InMemoryCheckpointer())
    assert result.status == "completed"
    assert result.state["nodes"]["review"]["status"] == "skipped"
    assert result.output == {"refund_id": "R-ACC-7-50", "approved_by_manager": False}


def test_refund_rejected_by_the_manager_refunds_nothing(ledger: Path) -> None:
    """approved=false: the refund's guard is false, nothing is moved."""
    store = tether.InMemoryCheckpointer()
    runner = tether.Runner(EXAMPLES / "refund/refund.yaml", store, _tasks())
    paused = runner.run({"amount": 500, "account": "ACC-42"})
    done = runner.resume(paused.execution_id, {"approved": False, "note": "no"})
    assert done.status == "completed", done.error
    assert done.output == {"refund_id": None, "approved_by_manager": True}
    assert done.state["nodes"]["refund"]["status"] == "skipped"
    assert not ledger.exists()


@pytest.mark.parametrize("workflow", ["refund/refund.yaml", "refund/refund.flow"])
def test_refund_of_an_unknown_account_fails_with_the_lookup_error_only(
        workflow: str, ledger: Path) -> None:
    """The lookup fails: the review and the refund are skipped as `upstream_failed` (trigger
    none_failed); the refund's guard is not evaluated on a review that never ran, so the run's
    one failure is the lookup's."""
    result = run_example(workflow, {"amount": 500, "account": "ACC-0"},
                         tether.InMemoryCheckpointer())
    assert result.status == "failed"
    assert result.error is not None and result.error["type"] == "LookupError"
    statuses = {node: entry["status"] for node, entry in result.state["nodes"].items()}
    assert statuses == {"lookup": "failed", "review": "upstream_failed",
                        "refund": "upstream_failed", "notify": "upstream_failed"}
    assert not ledger.exists()


def test_review_loop_revises_until_the_score_is_reached() -> None:
    """Three drafts (scores 3, 6, 9), then publish once."""
    result = run_example("review_loop/review_loop.yaml", {"topic": "Durable workflows"},
                         tether.InMemoryCheckpointer())
    assert result.status == "completed"
    assert result.output["score"] == 9
    assert result.state["counters"] == {"critique": 3}


def test_enrichment_collects_item_outputs_in_order() -> None:
    """for_each with concurrency 4: outputs in input order, one checkpoint per element."""
    store = tether.InMemoryCheckpointer()
    result = run_example("enrichment/enrichment.yaml", {"campaign": "q4", "limit": 9}, store)
    assert result.status == "completed"
    emails = [lead["email"] for lead in result.state["nodes"]["enrich"]["output"]]
    assert emails == [f"lead{i}@{d}" for i, d in enumerate(
        ["acme.com", "globex.com", "initech.com", "umbrella.com", "hooli.com"] * 2)][:9]
    items = [c.node_id for c in store.list(result.execution_id) if "/item:" in c.node_id]
    assert sorted(items) == sorted(f"enrich/item:{i}" for i in range(9))


@pytest.mark.parametrize(("total", "credit"), [(250, "skipped"), (2500, "completed")])
def test_fulfilment_decides_after_every_check(total: int, credit: str) -> None:
    """all_done joins the branches whether the credit check ran or was skipped."""
    result = run_example("fulfilment/fulfilment.yaml", {"order_id": "O-17", "total": total},
                         tether.InMemoryCheckpointer())
    assert result.output == {"decision": "ship", "checks": {
        "fraud": "completed", "credit": credit, "stock": "completed"}}


def test_order_runs_its_shipping_sub_workflow_in_the_same_execution() -> None:
    """Sub-run rows share the execution id under agent_path workflow:order/node:ship."""
    store = tether.InMemoryCheckpointer()
    result = run_example("order/order.yaml", {"order_id": "O-1", "address": "1 Main St"}, store)
    assert result.status == "completed"
    paths = {(c.node_id, c.agent_path) for c in store.list(result.execution_id)}
    assert ("book", "workflow:order/node:ship") in paths
    ends = [c for c in store.list(result.execution_id) if c.node_id == "run_end"]
    assert len(ends) == 1 and ends[0].agent_path == ""


def test_demo_script_runs_end_to_end(tmp_path: Path) -> None:
    """`make demo`'s script: run (pauses, exit 4), pending, resume, show — on SQLite."""
    env = {**os.environ, "DEMO_DB": f"sqlite:///{tmp_path / 'demo.db'}",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    result = subprocess.run(["bash", str(EXAMPLES / "demo.sh")], capture_output=True,
                            text=True, env=env, timeout=120, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "paused" in result.stdout or "manager_approval" in result.stdout
    assert "completed run" in result.stdout
    assert "run_end" in result.stdout
    assert "payer/turn:1/tool:payments.pay" in result.stdout and "approve_tool" in result.stdout
    assert '"receipt": "receipt for INV-7: paid"' in result.stdout


def _tasks() -> Any:
    import_tasks(TASK_MODULES)
    return REGISTRY


@pytest.mark.parametrize("path", [p for p in WORKFLOWS if p.suffix == ".yaml"],
                         ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_every_yaml_example_validates_against_the_json_schema(path: Path) -> None:
    """`tether schema` is generated from the same models: every example validates."""
    import jsonschema
    import yaml

    from tether.cli.authoring import workflow_schema

    jsonschema.validate(yaml.safe_load(path.read_text()), workflow_schema())


@pytest.mark.parametrize("path", [p for p in WORKFLOWS if p.suffix == ".flow"],
                         ids=lambda p: p.name)
def test_every_flow_example_converted_to_yaml_validates_against_the_json_schema(
        path: Path) -> None:
    """The .flow examples, converted with `fmt --to yaml`, validate too."""
    import jsonschema
    import yaml

    from tether.cli.authoring import workflow_schema
    from tether.dsl.convert import format_file

    jsonschema.validate(yaml.safe_load(format_file(path, to="yaml")), workflow_schema())


def test_payments_agent_asks_before_paying_and_pays_once(
        ledger: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The agent looks the invoice up, pauses before `payments.pay` with the call for a
    human, pays once when approved, and answers with the validated object."""
    from tether.testing import ScriptedModelServer, load_script

    with ScriptedModelServer(load_script(EXAMPLES / "payments/script.json")) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.openai_base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "example-key-0123456789")
        runner = tether.Runner(EXAMPLES / "payments/payments.yaml",
                               tether.InMemoryCheckpointer(), _tasks())
        paused = runner.run({"invoice": "INV-7"})
        assert paused.status == "paused"
        (pending,) = paused.pending
        assert pending.node_id == "payer/turn:1/tool:payments.pay"
        assert pending.context["arguments"]["amount"] == 120.0
        assert not ledger.exists()
        done = runner.resume(paused.execution_id, tether.Resume(approved=True))
    assert done.status == "completed", done.error
    assert done.output == {"paid": True, "receipt": "receipt for INV-7: paid"}
    kinds = [json.loads(line)["kind"] for line in ledger.read_text().splitlines()]
    assert kinds == ["payment", "receipt"]
    assert done.usage == {"input_tokens": 1582, "output_tokens": 111}
def test_release_builds_the_matrix_takes_one_branch_and_polls_until_deployed(
        ledger: Path) -> None:
    """The matrix leaves out the excluded combination; the switch runs only the stable branch
    (the beta one is skipped, the join runs with none_failed_min_one_success); the deploy is
    polled until done (three calls); an rc version takes the beta branch instead."""
    result = run_example("release/release.yaml", {"version": "1.2.0"},
                         tether.InMemoryCheckpointer())
    assert result.status == "completed", result.error
    assert result.output == {"channel": "stable", "polls": 3}
    nodes = result.state["nodes"]
    assert [b["os"] + b["python"] for b in nodes["build-matrix"]["output"]] == [
        "linux3.11", "linux3.12", "mac3.12"]
    assert nodes["publish-beta"]["status"] == "skipped"
    assert nodes["unknown-channel"]["status"] == "skipped"
    assert nodes["published"]["status"] == "completed"
    entries = [json.loads(line) for line in ledger.read_text().splitlines()]
    assert [e["publish"] for e in entries if "publish" in e] == ["stable"]
    assert next(e for e in entries if "publish" in e)["run"] == result.execution_id
    beta = run_example("release/release.yaml", {"version": "2.0.0rc1"},
                       tether.InMemoryCheckpointer())
    assert beta.output["channel"] == "beta"
