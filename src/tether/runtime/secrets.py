"""Secrets at run time: read from the environment at each use, never stored or printed.

A workflow declares the names of its secrets (``secrets: [STRIPE_KEY]``) and its templates read
``{{ secrets.STRIPE_KEY }}``; the value comes from the environment of the process running the
node, when the template is rendered. Nothing tether stores or prints holds a secret's value:
the :class:`Masker` of a run replaces every occurrence of a declared secret's current value
(and of its JSON-escaped form) with ``***`` in whatever is about to be written — checkpoint
states, inputs and outputs, pending contexts, errors, cached idempotent results — and in the
results handed back. Values shorter than :data:`MIN_MASKED` characters are not masked (masking
``1`` would mangle every number); such a value is not a secret anyone can keep.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

from tether.compiler.plan import Plan, WorkflowNode

MASK = "***"
MIN_MASKED = 4


class SecretMissing(Exception):
    """A template read a declared secret that this process's environment does not hold."""


class SecretsView:
    """``secrets`` as templates see it: the declared names, read from the environment."""

    __slots__ = ("_names",)

    def __init__(self, names: frozenset[str]) -> None:
        self._names = names

    def __getitem__(self, name: str) -> str:
        if name not in self._names:
            raise KeyError(name)
        value = os.environ.get(name)
        if value is None:
            raise SecretMissing(f"secret '{name}' is not set in the environment of the process "
                                "running this node")
        return value

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._names))

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"<secrets {', '.join(sorted(self._names))}>"


def declared(plan: Plan) -> frozenset[str]:
    """Every secret a plan and its sub-plans declare."""
    names = set(plan.secrets)
    for node in plan.nodes:
        if isinstance(node, WorkflowNode):
            names |= declared(node.workflow.plan)
    return frozenset(names)


class Masker:
    """Replaces the current values of a run's secrets with ``***``."""

    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def _values(self) -> list[str]:
        found: set[str] = set()
        for name in self.names:
            value = os.environ.get(name)
            if value is not None and len(value) >= MIN_MASKED:
                found.add(value)
                found.add(json.dumps(value, ensure_ascii=False)[1:-1])
        return sorted(found, key=len, reverse=True)

    def text(self, text: str | None) -> str | None:
        """``text`` with every secret value masked."""
        if text is None:
            return None
        for value in self._values():
            if value in text:
                text = text.replace(value, MASK)
        return text

    def value(self, value: Any) -> Any:
        """A JSON value with every secret value masked (the same object when none occurs)."""
        values = self._values()
        if not values:
            return value
        text = json.dumps(value, ensure_ascii=False)
        masked = text
        for secret in values:
            masked = masked.replace(secret, MASK)
        return value if masked == text else json.loads(masked)


def masked_names(plan: Plan) -> frozenset[str]:
    """The environment variables whose values a run of ``plan`` masks: its secrets, and the
    API keys its agents read."""
    from tether.runtime.executors.agent import api_key_names

    return declared(plan) | api_key_names(plan)


def masker_for(plan: Plan) -> Masker | None:
    """The masker of a run of ``plan``, or None when it has nothing to mask."""
    names = masked_names(plan)
    return Masker(names) if names else None
