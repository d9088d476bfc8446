"""The ``protocol`` marker: which store protocols (``tether.stores.contracts``) a
conformance file checks."""

from __future__ import annotations

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "protocol(*names): the store protocols a conformance file checks")
