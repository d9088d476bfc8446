"""An agent's tool approval in the console: the payments example's agent (its workflow, tasks
and script) against the scripted model server, with ``tether serve --worker`` as a real
subprocess continuing each run, in Debian's Chromium driven by Playwright and over HTTP.

The page shows the tool, its arguments and what the model wrote with the call, and offers
approve, approve with edited arguments (refused, with the problem on the form, when they do
not match the tool's schema) and deny with a message the model receives; the API takes the
same values as ``tether resume --value``. A form without a decision field offers to decline
by cancelling the run, after a confirmation.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from web_support import Project, Server, approval_path, served, tasks_file, wait_for

from tether.runtime.registry import import_tasks
from tether.runtime.runner import Runner
from tether.testing import (
    RecordedRequest,
    ScriptedModelServer,
    ScriptedReply,
    Step,
    load_script,
)
from tether.web.urls import approval_url, run_url

REPO = Path(__file__).resolve().parents[2]
PAYMENTS = REPO / "examples" / "payments"
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
KEY = "example-key-0123456789"
T = TypeVar("T")

CHOICE = """\
tether: 1
name: choice
nodes:
  pick:
    approval:
      reason: pick_a_limit
      form: {limit: {type: integer}}
  after:
    needs: [pick]
    approval: {reason: never_reached}
"""


def in_thread(fn: Callable[[], T]) -> T:
    """Call ``fn`` in another thread (Playwright's sync API owns this one's event loop)."""
    done: Future[T] = Future()
    threading.Thread(target=lambda: done.set_result(fn())).start()
    return done.result(60)


def _reply(request: RecordedRequest) -> Step:
    """The payments script's reply for where the conversation is (after no tool result: the
    lookup; after one: the payment; after two: the answer), so runs may interleave."""
    script = list(load_script(PAYMENTS / "script.json"))
    results = [m for m in request.body["messages"] if m.get("role") == "tool"]
    step = script[min(len(results), len(script) - 1)]
    assert isinstance(step, ScriptedReply)
    prompt = str(request.body["messages"][1].get("content", ""))
    if "<" in prompt and len(results) == 1:  # a hostile model: its text is the prompt's
        return step.model_copy(update={"text": prompt})
    return step


@pytest.fixture(scope="module")
def model() -> Iterator[ScriptedModelServer]:
    with ScriptedModelServer(respond=_reply) as server:
        yield server


@pytest.fixture(scope="module")
def payments(tmp_path_factory: pytest.TempPathFactory,
             model: ScriptedModelServer) -> Iterator[Project]:
    root = tmp_path_factory.mktemp("payments")
    shutil.copyfile(PAYMENTS / "payments.yaml", root / "payments.yaml")
    (root / "choice.yaml").write_text(CHOICE, encoding="utf-8")
    import_tasks([str(PAYMENTS / "tasks.py")])
    project = Project(root, tasks_file(tmp_path_factory.getbasetemp()))
    yield project
    project.close()


def _env(project: Project, model: ScriptedModelServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": model.openai_base_url, "OPENAI_API_KEY": KEY,
            "TETHER_EXAMPLE_LEDGER": str(project.root / "ledger.jsonl")}


@pytest.fixture(scope="module")
def console(payments: Project, model: ScriptedModelServer) -> Iterator[Server]:
    """No --auth (loopback), with a worker importing the payments tasks."""
    yield from served(payments, "--worker", "--tasks", str(PAYMENTS / "tasks.py"),
                      env=_env(payments, model))


@pytest.fixture(scope="module")
def guarded(payments: Project, model: ScriptedModelServer) -> Iterator[Server]:
    """With --auth token and no worker: answers are recorded for other processes."""
    yield from served(payments, auth=True, env=_env(payments, model))


def _pause(project: Project, model: ScriptedModelServer,
           monkeypatch: pytest.MonkeyPatch, invoice: str = "INV-7") -> tuple[str, str]:
    """A payments run paused before `payments.pay`."""
    for name, value in _env(project, model).items():
        monkeypatch.setenv(name, value)

    def start() -> Any:
        return Runner(project.root / "payments.yaml", project.store).run({"invoice": invoice})

    result = in_thread(start)
    assert result.status == "paused", result
    (pending,) = result.pending
    assert pending.context["tool"] == "payments.pay"
    return result.execution_id, pending.checkpoint_id


def _ledger(project: Project) -> list[dict[str, Any]]:
    path = project.root / "ledger.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() \
        else []


# -- HTTP ---------------------------------------------------------------------------------------
def test_the_api_shows_the_call_and_refuses_arguments_the_schema_refuses(
        guarded: Server, payments: Project, model: ScriptedModelServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """GET shows tool, arguments, schema and the model's text; edited arguments that do not
    match the schema are 422 naming `arguments`, and nothing is recorded; a denial with a
    message is recorded as the CLI's value."""
    eid, cid = _pause(payments, model, monkeypatch)
    shown = guarded.get(approval_path(eid, cid)).json()
    call = shown["tool_call"]
    assert call["tool"] == "payments.pay"
    assert call["arguments"]["iban"] == "DE02120300000000202051"
    assert call["reasoning"] == "INV-7 is due: 120 EUR to Acme Tools. Paying it."
    assert set(call["parameters"]["required"]) == {"invoice", "amount", "iban"}
    path = approval_path(eid, cid)
    for body, field in [
        ({"values": {"arguments": {"invoice": "INV-7", "amount": "lots", "iban": "x"}}},
         "arguments"),
        ({"values": {"arguments": {"invoice": "INV-7", "iban": "x"}}}, "arguments"),
        ({"values": {"arguments": {**call["arguments"], "currency": "GBP"}}}, "arguments"),
        ({"values": {"arguments": ["INV-7"]}}, "arguments"),
        ({"values": {"approved": False, "message": 7}}, "message"),
        ({"values": {"note": "no decision"}}, "decision"),
        ({"values": {"approved": True, "call_id": "call_other"}}, "call_id"),
    ]:
        refused = guarded.post(path, body)
        assert refused.status_code == 422, (body, refused.text)
        assert field in [e["field"] for e in refused.json()["errors"]], refused.json()
    assert payments.store.list_pending(eid) and not payments.store.decisions(eid)
    assert guarded.post(path, {"decision": "reject"}, user="vera").status_code == 403
    assert guarded.post(path, {"decision": "reject"}, user=None).status_code == 401
    denied = guarded.post(path, {"decision": "reject",
                                 "values": {"message": "INV-7 is paid by hand."}})
    assert denied.status_code == 200, denied.text
    [decision] = payments.store.decisions(eid)
    assert decision.value == {"approved": False, "message": "INV-7 is paid by hand."}
    assert decision.resolver == "alice"


def test_the_api_takes_the_clis_values_for_an_edited_approval(
        guarded: Server, payments: Project, model: ScriptedModelServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`values` exactly as `tether resume --value '{"arguments": {...}}'` takes them."""
    eid, cid = _pause(payments, model, monkeypatch)
    edited = {"invoice": "INV-7", "amount": 100, "iban": "DE02120300000000202051"}
    done = guarded.post(approval_path(eid, cid), {"values": {"arguments": edited}})
    assert done.status_code == 200, done.text
    [decision] = payments.store.decisions(eid)
    assert decision.value == {"arguments": edited}


def test_the_models_text_and_arguments_are_shown_as_text(
        console: Server, payments: Project, model: ScriptedModelServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """What the model wrote is untrusted: markup in it is escaped on the page."""
    payload = '<script>window.__xss = 1</script><img src=x onerror="alert(1)">'
    eid, cid = _pause(payments, model, monkeypatch, invoice=payload)
    page = console.get(approval_path(eid, cid, api=False)).text
    assert "<script>window.__xss" not in page and "<img src=x" not in page
    assert "&lt;script&gt;window.__xss = 1&lt;/script&gt;" in page
    console.post(approval_path(eid, cid), {"decision": "reject"})


def test_a_page_post_without_the_csrf_token_is_refused(
        console: Server, payments: Project, model: ScriptedModelServer,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The approval page's forms are CSRF-protected like every other form."""
    eid, cid = _pause(payments, model, monkeypatch)
    forged = console.client.post(approval_path(eid, cid, api=False),
                                 data={"decision": "reject", "field.message": "x"})
    assert forged.status_code == 403
    assert payments.store.list_pending(eid) and not payments.store.decisions(eid)
    console.post(approval_path(eid, cid), {"decision": "reject"})  # leave nothing paused


def test_declining_a_form_without_a_decision_field_asks_first_over_http(
        console: Server, payments: Project) -> None:
    """The page links to a confirmation; only its form cancels the run."""
    result = in_thread(lambda: Runner(payments.root / "choice.yaml", payments.store).run())
    eid, cid = result.execution_id, result.pending[0].checkpoint_id
    page = console.get(approval_path(eid, cid, api=False)).text
    assert 'id="decline-run"' in page and 'id="decline-yes"' not in page
    confirm = console.get(approval_path(eid, cid, api=False) + "?decline=1").text
    assert 'id="decline-yes"' in confirm and f"{run_url(eid)}/cancel" in confirm
    assert payments.store.get_run(eid).status == "paused"  # asking changed nothing


# -- the browser --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    playwright_sync = pytest.importorskip("playwright.sync_api")
    with playwright_sync.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1180, "height": 900})
    context.set_default_timeout(20_000)
    yield context.new_page()
    context.close()


def test_approve_with_edited_arguments_in_the_browser(
        console: Server, payments: Project, model: ScriptedModelServer, page: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The page shows the call; arguments the schema refuses are marked on the form and
    nothing is recorded; valid edited arguments are what the tool is called with."""
    from playwright.sync_api import expect

    eid, cid = _pause(payments, model, monkeypatch)
    before = len(_ledger(payments))
    page.goto(console.url + approval_url(eid, cid))
    expect(page.locator("#tool-name")).to_have_text("payments.pay")
    expect(page.locator("#reasoning")).to_contain_text("INV-7 is due: 120 EUR")
    expect(page.locator("#tool-arguments")).to_contain_text("DE02120300000000202051")
    box = page.locator("#tool-arguments-input")
    edited = {"invoice": "INV-7", "amount": 99.5, "iban": "DE02120300000000202051"}
    box.fill(json.dumps({**edited, "amount": "lots"}))
    page.get_by_role("button", name="Approve with these arguments").click()
    expect(page.locator('[data-error-for="arguments"]')).to_contain_text("amount")
    expect(page.locator('[data-field="arguments"]')).to_have_class(re.compile("invalid"))
    assert payments.store.list_pending(eid) and not payments.store.decisions(eid)
    box.fill(json.dumps(edited))
    page.get_by_role("button", name="Approve with these arguments").click()
    expect(page).to_have_url(re.compile(re.escape(run_url(eid)) + r"\?done=answered$"))
    expect(page.locator("#run-status")).to_have_text("completed")  # the worker went on
    [decision] = payments.store.decisions(eid)
    assert decision.value == {"arguments": edited}
    calls = [c for c in payments.store.list(eid)
             if c.step_type == "tool_call" and c.node_id.endswith("tool:payments.pay")]
    assert [c.node_input["amount"] for c in calls] == [99.5]
    paid = [e for e in _ledger(payments)[before:] if e["kind"] == "payment"]
    assert [p["amount"] for p in paid].count(99.5) == 1  # moved once, with the edit


def test_deny_with_a_message_in_the_browser(
        console: Server, payments: Project, model: ScriptedModelServer, page: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Denied: the tool never runs, and the model gets the message as the call's result."""
    from playwright.sync_api import expect

    eid, cid = _pause(payments, model, monkeypatch)
    asked = len(model.requests)
    page.goto(console.url + approval_url(eid, cid))
    message = "INV-7 was paid by hand yesterday."
    page.fill("#tool-message", message)
    page.get_by_role("button", name="Deny the call").click()
    expect(page.locator("#run-status")).to_have_text("completed")
    [decision] = payments.store.decisions(eid)
    assert decision.value == {"approved": False, "message": message}
    paid = [c for c in payments.store.list(eid)
            if c.step_type == "tool_call" and c.node_id.endswith("tool:payments.pay")]
    assert paid == []  # the tool never ran in this run

    def told() -> bool:  # other runs' requests may come between: find this one's
        return any(m.get("role") == "tool" and m.get("content") == message
                   for r in model.requests[asked:] for m in r.body["messages"])

    assert wait_for(told, "the model to receive the message as the call's result")


def test_declining_a_form_without_a_decision_field_cancels_after_confirming(
        console: Server, payments: Project, page: Any) -> None:
    """Decline → a confirmation → the run ends cancelled; 'keep it waiting' changes
    nothing."""
    from playwright.sync_api import expect

    result = in_thread(lambda: Runner(payments.root / "choice.yaml", payments.store).run())
    eid, cid = result.execution_id, result.pending[0].checkpoint_id
    page.goto(console.url + approval_url(eid, cid))
    page.locator("#decline-run").click()
    expect(page.locator("#decline-confirm")).to_contain_text(eid)
    page.locator("#decline-no").click()
    expect(page.locator("#decline-run")).to_be_visible()
    assert payments.store.get_run(eid).status == "paused"
    page.locator("#decline-run").click()
    page.locator("#decline-yes").click()
    expect(page).to_have_url(re.compile(re.escape(run_url(eid)) + r"\?done=cancelled$"))
    expect(page.locator("#run-status")).to_have_text("cancelled")
    assert payments.store.get_run(eid).status == "cancelled"


def test_a_refused_fork_is_shown_on_the_runs_fork_form(console: Server,
                                                       payments: Project) -> None:
    """The page's fork form (with its CSRF token) shows why a patch was refused, keeps the
    patch typed, and starts no run."""
    result = in_thread(lambda: Runner(payments.root / "choice.yaml", payments.store).run())
    eid = result.execution_id
    before = len(payments.store.find_runs(limit=1000))
    with httpx.Client(base_url=console.url, timeout=20) as client:
        shown = client.get(run_url(eid)).text
        token = shown.split('name="csrf_token" value="')[1].split('"')[0]
        patch = '{"inputs": {"limit": 3}}'
        refused = client.post(f"{run_url(eid)}/fork",
                              data={"csrf_token": token, "patch": patch})
    assert refused.status_code == 422
    assert 'data-error-for="patch"' in refused.text
    assert "&#39;inputs.limit&#39; is not an input of the plan" in refused.text
    assert "&#34;limit&#34;: 3" in refused.text or "&quot;limit&quot;: 3" in refused.text
    assert len(payments.store.find_runs(limit=1000)) == before
