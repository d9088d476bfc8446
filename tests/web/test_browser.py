"""The console in Debian's Chromium, driven by Playwright, against ``tether serve`` running
as a subprocess: the inbox, an approval with an invalid form (the error by its field),
approving and rejecting, the run completing on its page without a reload, two people
approving at once, the live update of a running run, and an XSS payload shown as text.

Screenshots of the inbox, an approval and a run page are saved as test artifacts
(``TETHER_ARTIFACTS``, default ``build/artifacts``); with ``TETHER_DOCS_SCREENSHOTS=1`` they
also replace the ones in ``docs/images``.
"""

from __future__ import annotations

import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

import pytest
from web_support import TOKENS, Project, Server, served, wait_for

from tether.web.urls import approval_url, run_url

playwright_sync = pytest.importorskip("playwright.sync_api")
from playwright.sync_api import Browser, Page, expect  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = Path(os.environ.get("TETHER_ARTIFACTS", REPO / "build" / "artifacts"))
T = TypeVar("T")

if not Path(CHROMIUM).exists():
    if os.environ.get("TETHER_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TETHER_REQUIRE_BROWSER=1 but {CHROMIUM} is missing",
                    pytrace=False)
    pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium; .ci/run installs it)",
                allow_module_level=True)


def in_thread(fn: Callable[[], T]) -> T:
    """Call ``fn`` in another thread: tether's sync API keeps its own event loop per thread,
    and Playwright's sync API owns this one's."""
    done: Future[T] = Future()
    threading.Thread(target=lambda: done.set_result(fn())).start()
    return done.result(60)


def screenshot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"console-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    if os.environ.get("TETHER_DOCS_SCREENSHOTS") == "1":
        shutil.copyfile(path, REPO / "docs" / "images" / path.name)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with playwright_sync.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def console(module_project: Project) -> Iterator[Server]:
    """A console on loopback without --auth, with an embedded worker."""
    yield from served(module_project, "--worker", "--tasks", str(module_project.tasks))


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1180, "height": 900})
    context.set_default_timeout(20_000)
    found = context.new_page()
    yield found
    context.close()


def _pause(project: Project, **inputs: Any) -> tuple[str, str]:
    return in_thread(lambda: project.pause(**inputs))


def test_inbox_approval_invalid_form_approve_and_the_run_completes(
        console: Server, module_project: Project, page: Page) -> None:
    eid, cid = _pause(module_project, amount=420, note="quarterly refund")
    page.goto(console.url + "/inbox")
    row = page.locator(f'tr[data-checkpoint-id="{cid}"]')
    expect(row).to_contain_text("review")
    expect(row).to_contain_text("manager_approval")
    screenshot(page, "inbox")
    row.get_by_role("link", name="Open").click()
    expect(page).to_have_url(console.url + approval_url(eid, cid))
    expect(page.locator("#context")).to_contain_text('"quarterly refund"')
    screenshot(page, "approval")
    page.fill('[name="field.limit"]', "twelve")
    page.get_by_role("button", name="Approve").click()
    error = page.locator('[data-error-for="limit"]')
    expect(error).to_have_text("field 'limit' must be an integer, not a string")
    expect(page.locator('[data-field="limit"]')).to_have_class(re.compile("invalid"))
    assert module_project.store.list_pending(eid)  # nothing recorded
    page.fill('[name="field.limit"]', "12")
    page.fill("#comment", "within budget")
    page.get_by_role("button", name="Approve").click()
    expect(page).to_have_url(re.compile(re.escape(run_url(eid)) + r"\?done=answered$"))
    expect(page.locator("#done")).to_contain_text("Your answer was recorded")
    expect(page.locator("#run-status")).to_have_text("completed")  # live, via the worker
    expect(page.locator("#output")).to_contain_text('"limit"')
    decision = page.locator(".decision")
    expect(decision).to_contain_text("within budget")
    screenshot(page, "run")


def test_reject_records_a_rejection_and_the_run_goes_on_with_it(
        console: Server, module_project: Project, page: Page) -> None:
    eid, cid = _pause(module_project, amount=999)
    page.goto(console.url + approval_url(eid, cid))
    page.fill('[name="field.limit"]', "0")
    page.fill("#comment", "too much")
    page.get_by_role("button", name="Reject").click()
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator("#output")).to_contain_text("false")
    [decision] = module_project.store.decisions(eid)
    assert decision.value == {"approved": False, "limit": 0}
    assert decision.comment == "too much"


def _sign_in(browser: Browser, server: Server, user: str) -> Page:
    context = browser.new_context()
    context.set_default_timeout(20_000)
    page = context.new_page()
    page.goto(server.url + "/inbox")
    expect(page).to_have_url(re.compile(r"/login\?next="))
    page.fill("#token", TOKENS[user])
    page.get_by_role("button", name="Sign in").click()
    expect(page.locator(".who")).to_have_text(user)
    return page


def test_two_people_approving_at_once_record_one_decision(
        auth_server: Server, module_project: Project, browser: Browser) -> None:
    eid, cid = _pause(module_project)
    alice, bob = _sign_in(browser, auth_server, "alice"), _sign_in(browser, auth_server, "bob")
    for person in (alice, bob):
        person.goto(auth_server.url + approval_url(eid, cid))
        person.fill('[name="field.limit"]', "3")
    alice.get_by_role("button", name="Approve").click(no_wait_after=True)
    bob.get_by_role("button", name="Approve").click(no_wait_after=True)
    # wait_for_load_state() alone returns at once: the form page is still the loaded one
    # until the POST's answer arrives. Wait for both answers' pages (recorded or refused)
    # before reading the store, or a loaded machine reads it before either POST landed.
    for person in (alice, bob):
        expect(person.locator("#done, #answered")).to_be_visible(timeout=60_000)
    decisions = module_project.store.decisions(eid)
    assert len(decisions) == 1
    winner = decisions[0].resolver
    loser = bob if winner == "alice" else alice
    winner_page = alice if winner == "alice" else bob
    expect(winner_page.locator("#done")).to_contain_text("Your answer was recorded",
                                                         timeout=20_000)
    message = loser.locator("#answered")
    expect(message).to_contain_text(f"Already answered by {winner} at ", timeout=20_000)
    expect(loser.locator("h1")).to_have_text("Already answered", timeout=20_000)
    for person in (alice, bob):
        person.context.close()


def test_a_running_run_updates_live_without_a_reload(
        console: Server, module_project: Project, page: Page, tmp_path: Path) -> None:
    gate = tmp_path / "gate"
    runner = module_project.runner("slow.yaml")
    finished: Future[Any] = Future()
    threading.Thread(target=lambda: finished.set_result(
        runner.run({"gate": str(gate)}))).start()
    run = wait_for(lambda: module_project.store.find_runs(workflow="slow", limit=1),
                   "the slow run to start")[0]
    page.goto(console.url + run_url(run.execution_id))
    expect(page.locator("#run-status")).to_have_text("running")
    expect(page.locator('g.node[data-node="gate"]')).to_have_class(re.compile("st-running"))
    page.evaluate("window.__notReloaded = true")
    gate.write_text("open")
    expect(page.locator("#run-status")).to_have_text("completed")
    expect(page.locator('g.node[data-node="last"]')).to_have_class(re.compile("st-completed"))
    assert page.evaluate("window.__notReloaded") is True
    assert finished.result(30).status == "completed"


def test_an_xss_payload_in_a_context_is_shown_as_text(
        console: Server, module_project: Project, page: Page) -> None:
    payload = '<script>window.__xss = 1</script><img src=x onerror="window.__xss = 2">'
    eid, cid = _pause(module_project, amount=1, note=payload)
    page.goto(console.url + approval_url(eid, cid))
    expect(page.locator("#context")).to_contain_text(payload.replace('"', '\\"'))
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("#context script, #context img").count() == 0
    page.goto(console.url + run_url(eid))
    expect(page.locator("#inputs")).to_contain_text("<script>")
    assert page.evaluate("typeof window.__xss") == "undefined"
