"""Evaluating a plan's templates against run state, in the sandbox, with strict names."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from jinja2 import Undefined
from jinja2.exceptions import SecurityError, TemplateError

from tether.errors import NotJSONError, Picklable, TemplateLimit
from tether.runtime.secrets import SecretMissing, SecretsView, reads_secrets
from tether.runtime.state import NodeError, RunState
from tether.status import UnitStatus
from tether.templating import TemplateBudget, compiled, has_markup
from tether.trigger import UNKNOWN_TRIGGER, Trigger

if TYPE_CHECKING:
    from tether.compiler.plan import Plan


class RenderError(Picklable, Exception):
    """A template that could not be evaluated; ``where`` names the value (``with.amount``)."""

    def __init__(self, where: str, message: str, *, secret: str | None = None) -> None:
        self.where = where
        self.secret = secret  # the secret's message, when a secret read failed
        super().__init__(f"cannot evaluate `{where}`: {message}")


class Names:
    """A read-only mapping whose keys templates read as attributes.

    It has no public methods, so an input or node called ``items``, ``keys`` or ``get`` is
    read as itself (Jinja2 tries attributes before items, and a dict's ``items`` method
    would win). A result that contains one is turned back into a plain dict.
    """

    __slots__ = ("_data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self._data = data

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return repr(self._data)


class NodesView(Names):
    """``nodes`` as templates see it: every node of the plan with its status and output."""

    __slots__ = ("_plan",)

    def __init__(self, plan: Plan, nodes: dict[str, Any]) -> None:
        super().__init__(nodes)
        self._plan = plan

    def __getitem__(self, node_id: str) -> Names:
        if node_id not in self._plan.by_id:
            raise KeyError(node_id)
        entry = self._data.get(node_id)
        if entry is None:
            return Names({"status": UnitStatus.PENDING.value, "output": None})
        return Names({"status": str(entry.get("status", UnitStatus.PENDING)),
                      "output": entry.get("output")})

    def __contains__(self, node_id: object) -> bool:
        return node_id in self._plan.by_id

    def __iter__(self) -> Iterator[str]:
        return iter(self._plan.by_id)

    def __len__(self) -> int:
        return len(self._plan.by_id)


class HeadersView(Names):
    """``trigger.headers``: the headers a webhook kept, read by any case of their name
    (``trigger.headers['X-GitHub-Event']`` is ``x-github-event``), as HTTP means them."""

    __slots__ = ()

    def __getitem__(self, key: str) -> Any:
        return self._data[key.lower() if isinstance(key, str) else key]

    def __contains__(self, key: object) -> bool:
        return (key.lower() if isinstance(key, str) else key) in self._data


def trigger_names(trigger: Trigger) -> Names:
    """``trigger`` as templates read it (headers by any case of their names)."""
    data = trigger.as_dict()
    data["headers"] = HeadersView(data["headers"])
    return Names(data)


RUN_FIELDS = ("id", "workflow", "started_at", "attempt", "parent_id")
"""What templates read as ``run.<field>`` (the compiler checks the same names)."""


@dataclass(frozen=True)
class RunInfo:
    """The run a template is rendered in: ``run.id``, ``run.workflow``, ``run.started_at``
    (ISO 8601 text), ``run.attempt`` (1 for the first execution, +1 per resume) and
    ``run.parent_id`` (the run a fork branched from, else None)."""

    id: str
    workflow: str
    started_at: str
    attempt: int = 1
    parent_id: str | None = None
    trigger: Trigger = UNKNOWN_TRIGGER
    """What started the run, read as ``trigger.*`` (``tether/trigger.py``)."""

    def names(self) -> Names:
        return Names({field: getattr(self, field) for field in RUN_FIELDS})

    @functools.cached_property
    def trigger_names(self) -> Names:
        """``trigger`` as templates read it (built once per attempt)."""
        return trigger_names(self.trigger)


def namespace(plan: Plan, state: RunState, *, item: Any = None, has_item: bool = False,
              iteration: int | None = None, secrets: SecretsView | None = None,
              run: RunInfo | None = None) -> dict[str, Any]:
    """The names a template of ``plan`` can read in ``state``."""
    names: dict[str, Any] = {"inputs": Names(state.inputs),
                             "nodes": NodesView(plan, state.nodes)}
    if run is not None:
        names["run"] = run.names()
        names["trigger"] = run.trigger_names
    if secrets is not None:
        names["secrets"] = secrets
    if has_item:
        names["item"] = item
    if iteration is not None:
        names["iteration"] = iteration
    return names


def render(value: Any, names: dict[str, Any], where: str,
           budget: TemplateBudget | None = None) -> Any:
    """``value`` with every template string evaluated (native values for ``{{ expr }}``),
    each within ``budget``; :class:`~tether.errors.TemplateLimit` names ``where``."""
    if isinstance(value, str):
        if not has_markup(value):
            return value
        try:
            result = compiled(value)(names, budget)
        except TemplateLimit as exc:
            raise exc.at(None, where) from None
        except SecurityError as exc:
            raise RenderError(where, f"refused by the template sandbox: {exc}") from None
        except TemplateError as exc:
            raise RenderError(where, str(exc)) from None
        except SecretMissing as exc:
            raise RenderError(where, str(exc), secret=str(exc)) from None
        except Exception as exc:  # errors inside the expression: 1/0, None + 1, ...
            raise RenderError(where, f"{type(exc).__name__}: {exc}") from None
        plain = _plain(result, where)
        view = names.get("secrets")
        if view is not None and reads_secrets(value):  # all it yields derives from a secret
            view.taint(plain)
        return plain
    if isinstance(value, list):
        return [render(v, names, f"{where}[{i}]", budget) for i, v in enumerate(value)]
    if isinstance(value, dict):
        return {k: render(v, names, f"{where}.{k}", budget) for k, v in value.items()}
    return value


def _plain(value: Any, where: str) -> Any:
    """An evaluated value with every view turned into a dict; undefined values refused."""
    if isinstance(value, Undefined):
        try:
            str(value)
        except TemplateError as exc:
            raise RenderError(where, str(exc)) from None
        raise RenderError(where, "the value is undefined")
    if isinstance(value, Names):
        return {key: _plain(value[key], where) for key in value}
    if isinstance(value, list | tuple):
        return [_plain(item, where) for item in value]
    if isinstance(value, Mapping):
        return {key: _plain(item, where) for key, item in value.items()}
    return value


def truthy(value: Any, names: dict[str, Any], where: str,
           budget: TemplateBudget | None = None) -> bool:
    """The truth of a condition."""
    return bool(render(value, names, where, budget))


def failure_of(exc: RenderError | NotJSONError | TemplateLimit,
               node_id: str | None) -> NodeError:
    """The error of a unit whose template or value failed."""
    if isinstance(exc, TemplateLimit):
        return NodeError("TemplateLimit", str(exc.at(node_id, exc.field)), node_id)
    if isinstance(exc, RenderError) and exc.secret is not None:  # never run with a wrong value
        return NodeError("SecretMissing", f"{exc.secret} (read in `{exc.where}` of node "
                         f"'{node_id}'); the node did not run: set the variable, then resume",
                         node_id)
    kind = "TemplateError" if isinstance(exc, RenderError) else type(exc).__name__
    return NodeError(kind, str(exc), node_id)
