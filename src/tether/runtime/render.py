"""Evaluating a plan's templates against run state, in the sandbox, with strict names."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jinja2 import Undefined
from jinja2.exceptions import SecurityError, TemplateError

from tether.compiler.plan import Plan
from tether.dsl.expressions import compiled, has_markup
from tether.runtime.state import PENDING


class RenderError(Exception):
    """A template that could not be evaluated; ``where`` names the value (``with.amount``)."""

    def __init__(self, where: str, message: str) -> None:
        self.where = where
        super().__init__(f"cannot evaluate `{where}`: {message}")


class NodesView(Mapping[str, Mapping[str, Any]]):
    """``nodes`` as templates see it: every node of the plan with its status and output."""

    __slots__ = ("_nodes", "_plan")

    def __init__(self, plan: Plan, nodes: dict[str, Any]) -> None:
        self._plan = plan
        self._nodes = nodes

    def __getitem__(self, node_id: str) -> Mapping[str, Any]:
        if node_id not in self._plan.by_id:
            raise KeyError(node_id)
        entry = self._nodes.get(node_id)
        if entry is None:
            return {"status": PENDING, "output": None}
        return {"status": entry.get("status", PENDING), "output": entry.get("output")}

    def __iter__(self) -> Iterator[str]:
        return iter(self._plan.by_id)

    def __len__(self) -> int:
        return len(self._plan.by_id)


def namespace(plan: Plan, state: dict[str, Any], *, item: Any = None, has_item: bool = False,
              iteration: int | None = None) -> dict[str, Any]:
    """The names a template of ``plan`` can read in ``state``."""
    names: dict[str, Any] = {"inputs": state["inputs"], "nodes": NodesView(plan, state["nodes"])}
    if has_item:
        names["item"] = item
    if iteration is not None:
        names["iteration"] = iteration
    return names


def render(value: Any, names: dict[str, Any], where: str) -> Any:
    """``value`` with every template string evaluated (native values for ``{{ expr }}``)."""
    if isinstance(value, str):
        if not has_markup(value):
            return value
        try:
            result = compiled(value)(names)
        except SecurityError as exc:
            raise RenderError(where, f"refused by the template sandbox: {exc}") from None
        except TemplateError as exc:
            raise RenderError(where, str(exc)) from None
        except Exception as exc:  # errors inside the expression: 1/0, None + 1, ...
            raise RenderError(where, f"{type(exc).__name__}: {exc}") from None
        _check_defined(result, where)
        return result
    if isinstance(value, list):
        return [render(v, names, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: render(v, names, f"{where}.{k}") for k, v in value.items()}
    return value


def _check_defined(value: Any, where: str) -> None:
    if isinstance(value, Undefined):
        try:
            str(value)
        except TemplateError as exc:
            raise RenderError(where, str(exc)) from None
        raise RenderError(where, "the value is undefined")
    if isinstance(value, list | tuple):
        for item in value:
            _check_defined(item, where)
    elif isinstance(value, Mapping) and not isinstance(value, NodesView):
        for item in value.values():
            _check_defined(item, where)


def truthy(value: Any, names: dict[str, Any], where: str) -> bool:
    """The truth of a condition."""
    return bool(render(value, names, where))
