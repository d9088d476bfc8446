"""Task checks, made only when task modules are given: names and ``with:`` against signatures."""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from tether.compiler.context import Context
from tether.jsontypes import json_type_name
from tether.suggest import did_you_mean
from tether.templating import has_markup


def is_literal(value: Any) -> bool:
    """Whether a JSON value contains no template markup anywhere."""
    if isinstance(value, str):
        return not has_markup(value)
    if isinstance(value, list):
        return all(is_literal(v) for v in value)
    if isinstance(value, dict):
        return all(is_literal(v) for v in value.values())
    return True


def check_tasks(ctx: Context, tasks: Mapping[str, Callable[..., Any]]) -> None:
    """Every task exists and its ``with:`` matches the callable's signature."""
    for node_id, node in ctx.workflow.nodes.items():
        if node.task is None:
            continue
        fn = tasks.get(node.task)
        if fn is None:
            ctx.report("E600", f"unknown task `{node.task}`", ctx.span("nodes", node_id, "task"),
                       node_id=node_id, help=did_you_mean(node.task, sorted(tasks))
                       or "register it with `@tether.task` in one of the task modules")
            continue
        _check_arguments(ctx, node_id, node.task, fn, node.with_ or {})


def _check_arguments(ctx: Context, node_id: str, name: str, fn: Callable[..., Any],
                     args: dict[str, Any]) -> None:
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return
    params = signature.parameters
    open_ended = any(p.kind is p.VAR_KEYWORD for p in params.values())
    named = {n: p for n, p in params.items()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    hints = _hints(fn)
    for arg, value in args.items():
        param = named.get(arg)
        if param is None:
            if not open_ended:
                ctx.report("E601", f"task `{name}` has no parameter `{arg}`",
                           ctx.key_span("nodes", node_id, "with", arg), node_id=node_id,
                           help=did_you_mean(arg, list(named))
                           or f"its parameters: {', '.join(named) or 'none'}")
            continue
        expected = hints.get(arg)
        if expected is not None and is_literal(value) and not conforms(value, expected):
            ctx.report("E501", f"argument `{arg}` of task `{name}` must be "
                       f"{describe_type(expected)}, not {json_type_name(value)}",
                       ctx.span("nodes", node_id, "with", arg), node_id=node_id)
    for param_name, param in params.items():
        required = param.default is param.empty and param.kind not in (
            param.VAR_POSITIONAL, param.VAR_KEYWORD)
        if required and param_name not in args:
            ctx.report("E602", f"task `{name}` needs argument `{param_name}`",
                       ctx.key_span("nodes", node_id), node_id=node_id,
                       help=f"add `{param_name}:` under `with:`")


def _hints(fn: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(inspect.unwrap(fn))
    except Exception:  # unresolvable annotations: skip type checks, never fail the check
        return {}


def conforms(value: Any, expected: Any) -> bool:
    """Whether a JSON literal fits a Python annotation (unknown annotations accept anything)."""
    if expected is Any or expected is object:
        return True
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return any(conforms(value, arg) for arg in typing.get_args(expected))
    if origin is typing.Literal:
        return value in typing.get_args(expected)
    if expected is type(None):
        return value is None
    base = origin or expected
    checks: dict[Any, Callable[[Any], bool]] = {
        str: lambda v: isinstance(v, str),
        bool: lambda v: isinstance(v, bool),
        int: lambda v: isinstance(v, int) and not isinstance(v, bool),
        float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
        list: lambda v: isinstance(v, list),
        tuple: lambda v: isinstance(v, list),
        dict: lambda v: isinstance(v, dict),
    }
    check = checks.get(base)
    if check is not None:
        return check(value)
    if isinstance(base, type) and hasattr(base, "model_validate"):
        return isinstance(value, dict)
    return True


def describe_type(expected: Any) -> str:
    """An annotation in words: ``a number``, ``a string or null``."""
    origin = typing.get_origin(expected)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(describe_type(arg) for arg in typing.get_args(expected))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(expected))
    names = {str: "a string", bool: "a boolean", int: "an integer", float: "a number",
             list: "a list", tuple: "a list", dict: "a mapping", type(None): "null"}
    base = origin or expected
    return names.get(base, f"a {getattr(base, '__name__', str(base))}")
