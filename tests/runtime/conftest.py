"""Makes the conformance helpers (``tests/stores/helpers.py``) importable here as
``conformance_helpers``: one copy of them serves both suites, under a name no other test
module uses."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_NAME = "conformance_helpers"

if _NAME not in sys.modules:
    _spec = importlib.util.spec_from_file_location(
        _NAME, Path(__file__).resolve().parents[1] / "stores" / "helpers.py")
    assert _spec is not None and _spec.loader is not None
    _module = importlib.util.module_from_spec(_spec)
    sys.modules[_NAME] = _module
    _spec.loader.exec_module(_module)
