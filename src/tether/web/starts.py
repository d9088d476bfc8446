"""Starting runs over HTTP: the workflows a console may start, and the start itself.

A new run needs a plan, so the console starts only workflows it was given files for
(``tether serve --workflows PATH``, repeatable: a workflow file, a plan ``.json``, or a
directory whose ``*.flow``, ``*.yaml``, ``*.yml`` files are each a workflow). They are
compiled when the console starts, so a broken file stops it at once (naming the file) rather
than failing a request later, and indexed by the workflow's ``name``; two files with one name
are refused. Plans already stored with runs are not enough: the store keeps plans by
fingerprint, not by which one is current. Changing a file takes a restart.

A start is :meth:`Runner.submit_run` with the request's inputs, queue, priority and
``Idempotency-Key`` (the dedup key, so the same key returns the same run: ``dedup.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.compiler.plan import Plan, PlanWebhook
from tether.errors import NotFoundError, TetherError
from tether.runtime.dedup import Submitted
from tether.runtime.runner import Runner
from tether.stores.base import Checkpointer
from tether.web.config import ConfigError

WORKFLOW_SUFFIXES = (".flow", ".yaml", ".yml")


class UnknownWorkflow(NotFoundError):
    """A start named a workflow the console was not given (HTTP 404)."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        listed = ", ".join(self.known[:20]) or "none: start tether serve with --workflows"
        super().__init__(f"no workflow named '{name}' on this console (known: {listed})")


@dataclass(frozen=True)
class Start:
    """What to start: the workflow's inputs, its queue and priority, and the dedup key."""

    inputs: Mapping[str, Any]
    queue: str = "default"
    priority: int = 0
    dedup_key: str | None = None


class Catalog:
    """The workflows a console may start, by name (see the module docstring)."""

    def __init__(self, plans: Mapping[str, Plan]) -> None:
        self.plans = dict(plans)
        self._runners: dict[str, Runner] = {}  # by workflow name: one per plan, made once
        self.hooks: dict[str, tuple[Plan, PlanWebhook]] = {}
        """The webhooks (``on: webhook``) of the plans, by path (``web/hooks.py``)."""
        for plan in self.plans.values():
            if plan.webhook is None:
                continue
            if plan.webhook.path in self.hooks:
                raise ConfigError(f"--workflows: workflows '{plan.name}' and "
                                  f"'{self.hooks[plan.webhook.path][0].name}' both listen at "
                                  f"/hooks/{plan.webhook.path}")
            self.hooks[plan.webhook.path] = (plan, plan.webhook)

    @classmethod
    def load(cls, paths: Iterable[str]) -> Catalog:
        """Compile every workflow under ``paths``; raises :class:`ConfigError` naming the
        file that cannot be used."""
        plans: dict[str, Plan] = {}
        origin: dict[str, Path] = {}
        for path in _files(paths):
            plan = _compile(path)
            if plan.name in plans:
                raise ConfigError(f"--workflows: {path} and {origin[plan.name]} both define "
                                  f"workflow '{plan.name}'")
            plans[plan.name], origin[plan.name] = plan, path
        return cls(plans)

    def plan(self, name: str) -> Plan:
        """The plan of workflow ``name``; :class:`UnknownWorkflow` when there is none."""
        found = self.plans.get(name)
        if found is None:
            raise UnknownWorkflow(name, self.plans)
        return found

    def start(self, store: Checkpointer, name: str, start: Start) -> Submitted:
        """Queue a run of workflow ``name`` (or return the run its dedup key names)."""
        runner = self._runners.get(name)
        if runner is None or runner.checkpointer is not store:
            runner = self._runners[name] = Runner(self.plan(name), store, {})
        return runner.submit_run(start.inputs, queue=start.queue, priority=start.priority,
                                 dedup_key=start.dedup_key)


def _files(paths: Iterable[str]) -> list[Path]:
    found: list[Path] = []
    for text in paths:
        path = Path(text)
        if path.is_dir():
            found.extend(sorted(p for p in path.iterdir()
                                if p.suffix.lower() in WORKFLOW_SUFFIXES and p.is_file()))
        elif path.is_file():
            found.append(path)
        else:
            raise ConfigError(f"--workflows: {text} is neither a workflow file nor a directory")
    return found


def _compile(path: Path) -> Plan:
    from tether.runtime.plans import load_plan

    try:
        return load_plan(path)
    except TetherError as exc:
        raise ConfigError(f"--workflows: {path}: {exc}") from None
