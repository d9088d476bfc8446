"""Secrets at run time: read from the environment at each use, never stored or printed.

A workflow declares the names of its secrets (``secrets: [STRIPE_KEY]``) and its templates read
``{{ secrets.STRIPE_KEY }}``; the value comes from the environment of the process running the
node, when the template is rendered. Nothing tether stores or prints holds a secret's value:

- **Taint.** A template that reads ``secrets`` yields a secret-derived value, whatever it
  does with it (filters, slices, concatenation, methods): the rule is decided per template
  from the names it reads (:func:`reads_secrets`), never by tracking strings through Jinja.
  Every string such a template produced in this process is remembered (:meth:`SecretsView.taint`)
  and masked like the secret itself.
- **Placeholders.** A node input rendered by such a template is stored as
  :func:`placeholder` names it (``"<secret: {{ secrets.KEY | trim }}>"``); the real value is
  rendered again from the environment every time the node runs.
- **Masking as values.** The :class:`Masker` of a run walks a JSON value and replaces, inside
  strings only, every occurrence of the secrets' current values and of the derived strings with
  ``***``. Keys, numbers, booleans and null are never touched, so masking never changes a value
  that holds no secret and never yields invalid JSON.

Values shorter than :data:`MIN_MASKED` characters are not masked (such a value is not a secret
anyone can keep); one shorter than :data:`ANYWHERE` characters is masked only where it stands
as a whole token (``1234`` in ``"pin 1234"``, not in ``"order-12345"``).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from jinja2 import TemplateSyntaxError, nodes

from tether.kinds import NodeKind
from tether.runtime.state import NodeError
from tether.templating import ENV, has_markup

if TYPE_CHECKING:
    from tether.compiler.plan import Plan

MASK = "***"
MIN_MASKED = 4
ANYWHERE = 12
"""Secret strings at least this long are masked wherever they occur; shorter ones only where
no letter or digit extends them (so a PIN ``1234`` leaves ``order-12345`` alone)."""


class SecretMissing(Exception):
    """A template read a declared secret that this process's environment does not hold."""


class SecretsView:
    """``secrets`` as templates see it: the declared names, read from the environment.

    It also remembers the strings that templates reading it produced in this process
    (:attr:`derived`), which the run's :class:`Masker` masks like the secrets themselves.
    """

    __slots__ = ("_names", "derived")

    def __init__(self, names: frozenset[str]) -> None:
        self._names = names
        self.derived: dict[str, None] = {}  # (insertion-ordered set, safe to copy from threads)

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

    def taint(self, value: Any) -> None:
        """Remember every string inside ``value`` (a secret-derived value) for masking."""
        if isinstance(value, str):  # (blank text reveals nothing, and masking it would
            # blank every indentation)
            if len(value) >= MIN_MASKED and value not in self.derived and value.strip():
                self.derived[value] = None
        elif isinstance(value, list | tuple):
            for item in value:
                self.taint(item)
        elif isinstance(value, dict):
            for item in value.values():
                self.taint(item)


@functools.lru_cache(maxsize=65536)
def reads_secrets(text: str) -> bool:
    """Whether the template ``text`` reads ``secrets`` anywhere (then all it yields is secret).

    A template that cannot be parsed counts as reading them: it fails to render anyway.
    """
    if not has_markup(text) or "secrets" not in text:
        return False
    try:
        tree = ENV.parse(text)
    except (TemplateSyntaxError, RecursionError):
        return True
    return any(name.name == "secrets" for name in tree.find_all(nodes.Name))


def placeholder(text: str) -> str:
    """What is stored instead of the value of the secret-reading template ``text``."""
    return f"<secret: {text.strip()}>"


def stored_form(template: Any, rendered: Any) -> Any:
    """``rendered`` (the value of ``template``) as it may be stored: every part rendered by a
    template that reads secrets replaced by its :func:`placeholder`."""
    if isinstance(template, str):
        return placeholder(template) if reads_secrets(template) else rendered
    if isinstance(template, dict) and isinstance(rendered, dict):
        return {k: stored_form(template.get(k), v) for k, v in rendered.items()}
    if isinstance(template, list) and isinstance(rendered, list) and \
            len(template) == len(rendered):
        return [stored_form(t, v) for t, v in zip(template, rendered, strict=True)]
    return rendered


def has_secret_templates(template: Any) -> bool:
    """Whether any string inside ``template`` reads ``secrets``."""
    if isinstance(template, str):
        return reads_secrets(template)
    if isinstance(template, dict):
        return any(has_secret_templates(v) for v in template.values())
    if isinstance(template, list):
        return any(has_secret_templates(v) for v in template)
    return False


def declared(plan: Plan) -> frozenset[str]:
    """Every secret a plan and its sub-plans declare."""
    names = set(plan.secrets)
    for node in plan.nodes:
        if node.kind is NodeKind.WORKFLOW:
            names |= declared(node.workflow.plan)
    return frozenset(names)


@functools.lru_cache(maxsize=4096)
def _pattern(strings: tuple[str, ...]) -> re.Pattern[str]:
    """One regular expression finding any of ``strings`` (longest first); a short one only
    where no word character extends it."""
    parts = []
    for text in sorted(set(strings), key=len, reverse=True):
        part = re.escape(text)
        if len(text) < ANYWHERE:
            before = r"(?<!\w)" if re.match(r"\w", text[0]) else ""
            after = r"(?!\w)" if re.match(r"\w", text[-1]) else ""
            part = before + part + after
        parts.append(part)
    return re.compile("|".join(parts))


class Masker:
    """Masks a run's secret strings inside JSON values (never in their text).

    The strings are the current environment values of ``names`` (declared secrets, agent API
    keys) and the strings derived from them by secret-reading templates (``derived``, shared
    with the run's :class:`SecretsView`).
    """

    def __init__(self, names: frozenset[str], derived: dict[str, None] | None = None) -> None:
        self.names = names
        self.derived: dict[str, None] = derived if derived is not None else {}

    def strings(self) -> tuple[str, ...]:
        """Every string masked now."""
        found = [value for name in sorted(self.names)
                 if (value := os.environ.get(name)) is not None and len(value) >= MIN_MASKED]
        found.extend(list(self.derived))
        return tuple(found)

    def text(self, text: str | None) -> str | None:
        """A plain string (a message, a reason) with every secret string masked."""
        return text if text is None else masked(text, self.strings())

    def value(self, value: Any) -> Any:
        """A JSON value with every secret string masked inside its strings (the same object
        when none occurs); keys, numbers, booleans and null are never changed."""
        strings = self.strings()
        return masked(value, strings) if strings else value


def masked(value: Any, strings: tuple[str, ...]) -> Any:
    """``value`` with ``strings`` masked inside its strings (the same object if unchanged).

    Each string is first searched for the secret strings it contains (plain substring
    tests, so a run with many derived strings compiles no large expression); only those found
    go into the expression that masks, with the token rule of :data:`ANYWHERE`.
    """
    if isinstance(value, str):
        found = tuple(text for text in strings if text in value)
        if not found:
            return value
        result = _pattern(found).sub(MASK, value)
        return value if result == value else result
    if isinstance(value, list):
        items = [masked(item, strings) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else items
    if isinstance(value, dict):
        entries = {key: masked(item, strings) for key, item in value.items()}
        return value if all(entries[k] is v for k, v in value.items()) else entries
    return value


def masked_error(masker: Masker, error: NodeError) -> NodeError:
    """``error`` with the secret strings masked in its message (the same object if none)."""
    message = masker.text(error.message)
    return error if message == error.message else replace(error, message=message or "")


def masked_names(plan: Plan) -> frozenset[str]:
    """The environment variables whose values a run of ``plan`` masks: its secrets, and the
    API keys its agents read."""
    return declared(plan) | api_key_names(plan)


def api_key_names(plan: Plan) -> frozenset[str]:
    """The environment variables the agents of a plan (and its sub-plans) read keys from:
    their values are masked like secrets'. (The providers' module is imported only for a
    plan with agents.)"""
    names: set[str] = set()
    if plan.agents_by_id:
        from tether.agents.providers.base import DEFAULT_KEY_ENV, Provider

        names = {agent.model.api_key_env or DEFAULT_KEY_ENV[Provider(agent.model.provider)]
                 for agent in plan.agents_by_id.values()}
    for node in plan.nodes:
        if node.kind is NodeKind.WORKFLOW:
            names |= api_key_names(node.workflow.plan)
    return frozenset(names)


def masker_for(plan: Plan, view: SecretsView | None = None) -> Masker | None:
    """The masker of a run of ``plan`` (sharing ``view``'s derived strings), or None when it
    has nothing to mask."""
    names = masked_names(plan)
    return Masker(names, view.derived if view is not None else None) if names else None
