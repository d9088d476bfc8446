"""The public names of ``tether.agents`` and ``tether.testing``: each listed once, importable
and documented."""

from __future__ import annotations

import inspect

import pytest

import tether.agents
import tether.testing


@pytest.mark.parametrize("module", [tether.agents, tether.testing])
def test_every_public_name_imports_and_is_documented(module: object) -> None:
    names = module.__all__  # type: ignore[attr-defined]
    assert len(names) == len(set(names)) and names == sorted(names)
    namespace: dict[str, object] = {}
    exec(f"from {module.__name__} import *", namespace)  # type: ignore[attr-defined]
    for name in names:
        assert namespace[name] is getattr(module, name)
        value = getattr(module, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), f"{name} has no docstring"


def test_agent_errors_form_one_subtree_of_tether_errors() -> None:
    errors = [getattr(tether.agents, n) for n in tether.agents.__all__
              if n.endswith(("Error", "Unavailable", "Key"))]
    assert len(errors) == 8
    assert all(issubclass(e, tether.agents.AgentError) for e in errors)
    assert issubclass(tether.agents.AgentError, tether.TetherError)
