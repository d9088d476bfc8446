"""The console's "start a run" form in Debian's Chromium (Playwright) against a real ``tether
serve --workflows`` subprocess: the form is built from the workflow's inputs, a value of the
wrong type is shown at its field and starts nothing, a good one starts a run (its page
follows) with the typed inputs, queue and priority; a viewer gets no form.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from web_support import TOKENS, Project, Server, served

from tether.web.urls import run_url

playwright_sync = pytest.importorskip("playwright.sync_api")
from playwright.sync_api import Browser, Page, expect  # noqa: E402

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]

if not Path(CHROMIUM).exists():
    if os.environ.get("TETHER_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TETHER_REQUIRE_BROWSER=1 but {CHROMIUM} is missing", pytrace=False)
    pytest.skip(f"{CHROMIUM} is missing", allow_module_level=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with playwright_sync.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield launched
        launched.close()


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport={"width": 1180, "height": 900})
    context.set_default_timeout(20_000)
    yield context.new_page()
    context.close()


@pytest.fixture
def console(project: Project) -> Iterator[Server]:
    yield from served(project, "--workflows", str(project.root / "review.yaml"))


def test_the_start_form_starts_a_run(console: Server, project: Project, page: Page) -> None:
    page.goto(console.url + "/workflows")
    page.click("a:text('review')")
    expect(page.locator("#workflow-name")).to_have_text("review")
    expect(page.locator("[data-field=amount] label")).to_contain_text("required")
    page.fill("[data-field=amount] input", "a lot")
    page.click("#start-run")
    expect(page.locator("[data-error-for=amount]")).to_be_visible()
    assert project.store.find_runs(workflow="review", limit=10) == []
    page.fill("[data-field=amount] input", "250")
    page.fill("[data-field=note] input", "from the browser <b>")
    page.fill("#priority", "5")
    page.click("#start-run")
    page.wait_for_url("**/runs/**")
    runs = project.store.find_runs(workflow="review", limit=10)
    assert len(runs) == 1
    run = runs[0]
    assert page.url == console.url + run_url(run.execution_id)
    assert run.inputs == {"amount": 250, "note": "from the browser <b>"}
    assert (run.status, run.queue, run.priority) == ("queued", "default", 5)
    assert run.trigger is not None and run.trigger.kind == "manual"
    assert run.trigger.actor == "local"  # the console user (without --auth: `local`)
    expect(page.locator("#started-by")).to_have_text("manual by local")


def test_a_viewer_gets_no_form(project: Project, page: Page) -> None:
    for server in served(project, "--workflows", str(project.root / "review.yaml"),
                         auth=True):
        page.goto(server.url + "/login")
        page.fill("input[name=token]", TOKENS["vera"])
        page.locator("form button[type=submit]").first.click()
        page.goto(server.url + "/workflows/review/start")
        expect(page.locator("body")).to_contain_text("may not start runs")
        assert server.get("/workflows/review/start", user="vera").status_code == 403
