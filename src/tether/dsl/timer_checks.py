"""Checks of the durable timers in a document: ``sleep``, ``sleep_until`` and an approval's
``timeout`` / ``on_timeout`` (codes E850-E854)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tether.dsl.source import Path
from tether.durations import DurationError, parse_duration
from tether.jsontypes import article, json_type_name, matches_type
from tether.timestamps import TimestampError, parse_timestamp

Add = Callable[..., None]
"""``mapper.add(code, message, path, *, key=False, help=None)`` of the validator."""

_DURATION_HELP = "write a positive number and a unit: 500ms, 30s, 5m, 2h, 1d, 2w"


def check_timers(add: Add, node_id: str, node: dict[str, Any], path: Path) -> None:
    """Report what is wrong with the timers of node ``node_id`` at ``path``."""
    sleep = node.get("sleep")
    if isinstance(sleep, str) and "{{" not in sleep:
        try:
            parse_duration(sleep)
        except DurationError as exc:
            add("E850", f"`sleep` of node `{node_id}`: {exc}", (*path, "sleep"),
                help=_DURATION_HELP)
    until = node.get("sleep_until")
    if isinstance(until, str) and "{{" not in until:
        try:
            parse_timestamp(until)
        except TimestampError as exc:
            add("E851", f"`sleep_until` of node `{node_id}`: {exc}", (*path, "sleep_until"),
                help="give ISO 8601 text with an offset, a Unix number, or a template")
    approval = node.get("approval")
    if isinstance(approval, dict):
        _check_approval(add, node_id, approval, (*path, "approval"))


def _check_approval(add: Add, node_id: str, approval: dict[str, Any], path: Path) -> None:
    timeout = approval.get("timeout")
    if isinstance(timeout, str) and "{{" not in timeout:  # a template: checked as a setting
        try:
            parse_duration(timeout)
        except DurationError as exc:
            add("E852", f"`approval.timeout` of node `{node_id}`: {exc}", (*path, "timeout"),
                help=_DURATION_HELP)
    on_timeout = approval.get("on_timeout")
    if on_timeout is not None and timeout is None:
        add("E853", f"approval `{node_id}` has `on_timeout` but no `timeout`",
            (*path, "on_timeout"), key=True, help="add `timeout: 3d` (how long it waits)")
    form = approval.get("form")
    if isinstance(on_timeout, dict) and isinstance(form, dict):
        for problem in answer_problems(form, on_timeout):
            add("E854", f"the `on_timeout` answer of approval `{node_id}` {problem}",
                (*path, "on_timeout"), help="give every required form field, with its type")


def answer_problems(form: dict[str, Any], answer: dict[str, Any]) -> list[str]:
    """How ``answer`` does not match the form (field -> its spec mapping, as written)."""
    problems = []
    for name in answer:
        if name not in form:
            problems.append(f"gives `{name}`, which the form does not have")
    for name, spec in form.items():
        spec = spec if isinstance(spec, dict) else {}
        type_name = str(spec.get("type", "string"))
        if name not in answer:
            if "default" not in spec:
                problems.append(f"lacks the required field `{name}`")
        elif not matches_type(answer[name], type_name):
            problems.append(f"gives `{name}` as {json_type_name(answer[name])}, not "
                            f"{article(type_name)}")
    return problems


__all__ = ["answer_problems", "check_timers"]
