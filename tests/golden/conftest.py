"""``--update-golden``: write the expected output of golden cases instead of comparing.

An option of this directory, so it is given with it: ``pytest tests/golden --update-golden``.
Without it, a case whose ``.expected`` file is missing fails.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--update-golden", action="store_true", default=False,
                     help="write each golden case's .expected file from the current output")


@pytest.fixture
def update_golden(request: pytest.FixtureRequest) -> bool:
    """Whether to write the expected files (``--update-golden``) instead of comparing."""
    return bool(request.config.getoption("--update-golden"))
