"""Fixtures of the console tests: a project directory with a store, and servers on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect
from web_support import Project, Server, served, tasks_file

# Playwright's `expect` waits 5 s by default, which a loaded machine can exceed while the
# console answers: an assertion about a page waits for it, it does not race it.
expect.set_options(timeout=20_000)


@pytest.fixture
def project(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    found = Project(tmp_path, tasks_file(tmp_path_factory.getbasetemp()))
    yield found
    found.close()


@pytest.fixture(scope="module")
def module_project(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Project]:
    found = Project(tmp_path_factory.mktemp("console"),
                    tasks_file(tmp_path_factory.getbasetemp()))
    yield found
    found.close()


@pytest.fixture(scope="module")
def auth_server(module_project: Project) -> Iterator[Server]:
    """A console with --auth token (alice and bob approve, vera views), no worker."""
    yield from served(module_project, auth=True)
