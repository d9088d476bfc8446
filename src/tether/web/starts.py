"""Starting runs over HTTP: the workflows a console may start, and the start itself.

A new run needs a plan, so the console starts only workflows it was given files for
(``tether serve --workflows PATH``, repeatable: a workflow file, a plan ``.json``, or a
directory whose ``*.flow``, ``*.yaml``, ``*.yml`` files are each a workflow). They are
compiled when the console starts, so a broken file stops it at once (naming the file) rather
than failing a request later, and indexed by the workflow's ``name``; two files with one name
are refused. Plans already stored with runs are not enough: the store keeps plans by
fingerprint, not by which one is current. Changing a file takes a restart.

A start is :meth:`Runner.submit_run` with the request's inputs, queue, priority and
``Idempotency-Key`` (the dedup key, so the same key returns the same run: ``dedup.py``), and
what started it (the run's ``trigger``: the API's caller, the form's user, the webhook). A
start by hand (the API, the form) is allowed only for a workflow without ``on:`` or whose
``on:`` lists ``manual`` (:meth:`Catalog.manual_plan`); a webhook's start is not one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tether.compiler.plan import Plan, PlanWebhook
from tether.errors import NotFoundError, UsageError
from tether.runtime.dedup import Submitted
from tether.runtime.runner import Runner
from tether.stores.base import Checkpointer
from tether.trigger import Trigger
from tether.web.auth import Forbidden
from tether.web.config import ConfigError


class UnknownWorkflow(NotFoundError):
    """A start named a workflow the console was not given (HTTP 404)."""

    def __init__(self, name: str, known: Iterable[str]) -> None:
        self.name = name
        self.known = sorted(known)
        listed = ", ".join(self.known[:20]) or "none: start tether serve with --workflows"
        super().__init__(f"no workflow named '{name}' on this console (known: {listed})")


@dataclass(frozen=True)
class Start:
    """What to start: the workflow's inputs, its queue and priority, the dedup key, and
    what started it (stored with the run: ``tether/trigger.py``)."""

    inputs: Mapping[str, Any]
    queue: str = "default"
    priority: int = 0
    dedup_key: str | None = None
    trigger: Trigger | None = None


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
        from tether.runtime.plans import load_plans

        try:
            loaded = load_plans(paths)
        except UsageError as exc:
            raise ConfigError(f"--workflows: {exc}") from None
        plans: dict[str, Plan] = {}
        origin: dict[str, Path] = {}
        for path, plan in loaded:
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

    def manual_plan(self, name: str, who: str) -> Plan:
        """The plan of workflow ``name`` if ``who`` may start it by hand (the Start form,
        the API); :class:`~tether.web.auth.Forbidden` (403) saying why not: its ``on:``
        has no ``manual``, or ``on.manual.users`` does not list ``who``."""
        plan = self.plan(name)
        refusal = manual_refusal(plan, who)
        if refusal is not None:
            raise Forbidden(refusal)
        return plan

    def start(self, store: Checkpointer, name: str, start: Start) -> Submitted:
        """Queue a run of workflow ``name`` (or return the run its dedup key names)."""
        runner = self._runners.get(name)
        if runner is None or runner.checkpointer is not store:
            runner = self._runners[name] = Runner(self.plan(name), store, {})
        return runner.submit_run(start.inputs, queue=start.queue, priority=start.priority,
                                 dedup_key=start.dedup_key,
                                 trigger=start.trigger)


def manual_refusal(plan: Plan, who: str) -> str | None:
    """Why ``who`` may not start ``plan`` by hand, or None when they may."""
    manual = plan.manual
    if manual is None or (manual.allowed and (not manual.users or who in manual.users)):
        return None
    if not manual.allowed:
        return (f"workflow '{plan.name}' is not started by hand: its `on:` does not list "
                "`manual` (add `manual: true` to `on:` to allow it)")
    return f"{who} may not start workflow '{plan.name}' by hand (on.manual.users)"
