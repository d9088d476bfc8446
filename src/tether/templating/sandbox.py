"""The sandboxed Jinja2 environment templates run in, metered against their budget.

On top of Jinja2's immutable sandbox (no private attributes, no mutation, ``range`` bounded):

- no constant folding: the optimizer is off, and output goes through a context-bound
  ``finalize``, so compiling ``{{ 9 ** (9 ** 9) }}`` never computes it (``check`` compiles
  conditions to find the constant ones);
- ``*``, ``**``, ``+`` and ``%`` are intercepted (:data:`INTERCEPTED`) and refused before
  computing a result over the budget; ``~`` builds its string through :meth:`checked_concat`;
- every ``for`` loop steps through :meth:`metered_iter`, so nested loops meet the deadline
  even when they print nothing;
- filters, tests, calls and ``str.format`` are checked before and charged after.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator
from string import Formatter
from typing import Any

from jinja2 import StrictUndefined, nodes, pass_context, pass_environment
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedFormatter

from tether.templating.checks import (
    BINOP_CHECKS,
    FILTER_CHECKS,
    check_format_spec,
    check_lipsum,
    check_str_method,
    linear_sum,
    materialise,
)
from tether.templating.meter import current, text_size

INTERCEPTED = frozenset(BINOP_CHECKS)


class _CodeGenerator(CodeGenerator):
    """Jinja2's code generator, with loops and ``~`` routed through the environment."""

    def visit_For(self, node: nodes.For, frame: Frame) -> None:
        if not _is_metered(node.iter):  # (Jinja2 allows no new node types: a call it is)
            node.iter = nodes.Call(nodes.EnvironmentAttribute("metered_iter"), [node.iter], [],
                                   None, None, lineno=node.lineno)
        super().visit_For(node, frame)

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.checked_concat((")
        for part in node.nodes:
            self.visit(part, frame)
            self.write(", ")
        self.write("))")


def _is_metered(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Call) and isinstance(node.node, nodes.EnvironmentAttribute) \
        and node.node.name == "metered_iter"


@pass_context
def _finalize(context: Context, value: Any) -> Any:
    """Every ``{{ }}`` of a string template: its text within the cap. Needing the context, it
    also keeps Jinja2 from evaluating constant output while compiling."""
    meter = current()
    meter.allow(text_size(value, meter.limit), "an output value")
    return value


class _Formatter(SandboxedFormatter):
    """``str.format`` in the sandbox: every field's spec and the running length checked."""

    def __init__(self, env: Sandbox) -> None:
        super().__init__(env)
        self.length = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        meter = current()
        check_format_spec(meter, format_spec)
        meter.allow(self.length + text_size(value, meter.limit), "formatting")
        text = super().format_field(value, format_spec)
        self.length += len(text)
        meter.allow(self.length, "formatting")
        return text


def _prechecked(text: str, wrapped: Callable[..., str], is_map: bool) -> Callable[..., str]:
    """``format`` of a Markup string: every spec and the total estimated before formatting."""
    def format_(*args: Any, **kwargs: Any) -> str:
        meter = current()
        fields = list(Formatter().parse(text))
        for _, _, spec, _ in fields:
            check_format_spec(meter, spec or "")
            if spec and "{" in spec:
                meter.allow(meter.limit + 1, "a nested format spec in markup")
        values = [*args, *kwargs.values()] if not is_map else list(args[0].values())
        widest = max((text_size(v, meter.limit) for v in values), default=0)
        meter.allow(len(text) + len(fields) * widest, "formatting")
        return wrapped(*args, **kwargs)

    return format_


def _checked_filter(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """``func`` with its check before and its result charged after; keeps how Jinja2 passes
    it the context or environment (``functools.wraps`` copies the marker)."""
    check = FILTER_CHECKS.get(name)
    offset = 1 if hasattr(func, "jinja_pass_arg") else 0

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        meter = current()
        meter.tick()
        if check is not None and len(args) > offset:
            value = check(meter, args[offset], args[offset + 1:], kwargs)
            args = (*args[:offset], value, *args[offset + 1:])
        result = func(*args, **kwargs)
        meter.charge(result, f"the result of `{name}`")
        return result

    return checked


def _ticking(func: Any) -> Callable[..., Any]:
    @functools.wraps(func)
    def ticking(*args: Any, **kwargs: Any) -> Any:
        current().tick()
        return func(*args, **kwargs)

    return ticking


def _linear_sum(builtin: Callable[..., Any]) -> Callable[..., Any]:
    @pass_environment
    @functools.wraps(builtin)
    def sum_(environment: Any, iterable: Iterable[Any], attribute: Any = None,
             start: Any = 0) -> Any:
        items = materialise(current(), iterable)
        if attribute is None and isinstance(start, list | tuple) and all(
                isinstance(item, type(start)) for item in items):
            return linear_sum(current(), items, start)
        return builtin(environment, items, attribute, start)

    return sum_


def _refused_attr(value: Any, name: Any) -> Any:
    """``attr`` is refused: an attribute named by a computed string is one no check sees
    (``check`` reports it as E423/E424); ``.name`` and ``['name']`` read attributes."""
    raise SecurityError(f"the attr filter is refused (attr({name!r})); read attributes "
                        "with .name or ['name']")


class Sandbox(ImmutableSandboxedEnvironment):
    """The environment of every template tether renders."""

    code_generator_class = _CodeGenerator
    intercepted_binops = INTERCEPTED

    def __init__(self) -> None:
        super().__init__(undefined=StrictUndefined, autoescape=False, optimized=False,
                         finalize=_finalize)
        self.filters["sum"] = _linear_sum(self.filters["sum"])
        self.filters["attr"] = _refused_attr
        self.filters = {name: _checked_filter(name, f) for name, f in self.filters.items()}
        self.tests = {name: _ticking(test) for name, test in self.tests.items()}
        lipsum = self.globals["lipsum"]
        assert callable(lipsum)
        self.globals["lipsum"] = self._lipsum(lipsum)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        meter = current()
        meter.tick()
        BINOP_CHECKS[operator](meter, left, right)
        result = self.binop_table[operator](left, right)
        meter.charge(result, f"`{operator}`")
        return result

    def call(self, context: Context, obj: Any, /, *args: Any, **kwargs: Any) -> Any:
        meter = current()
        meter.tick()
        owner = getattr(obj, "__self__", None)
        if isinstance(owner, str | bytes):
            args = check_str_method(meter, owner, getattr(obj, "__name__", ""), args)
        result = super().call(context, obj, *args, **kwargs)
        meter.charge(result, "the result of a call")
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        text: str = value.__self__
        is_map = value.__name__ == "format_map"
        if type(text) is not str:  # Markup: Jinja2's escaping formatter, checked up front
            return _prechecked(text, wrapped, is_map)

        def format_(*args: Any, **kwargs: Any) -> str:
            if is_map and (kwargs or len(args) != 1):
                return wrapped(*args, **kwargs)  # raises the TypeError str.format_map would
            values = args[0] if is_map else kwargs
            return str(_Formatter(self).vformat(text, () if is_map else args, values))

        return format_

    def metered_iter(self, iterable: Iterable[Any]) -> Iterator[Any]:
        """The items of a loop, a step of the meter each."""
        meter = current()
        for item in iterable:
            meter.step()
            yield item

    def checked_concat(self, parts: tuple[Any, ...]) -> str:
        """``a ~ b``: the parts' text within the cap, then joined."""
        meter = current()
        total = 0
        for part in parts:
            total += text_size(part, meter.limit)
            meter.allow(total, "`~`")
        result = "".join(map(str, parts))
        meter.charge(result, "`~`")
        return result

    @staticmethod
    def _lipsum(builtin: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(builtin)
        def lipsum(*args: Any, **kwargs: Any) -> Any:
            check_lipsum(current(), args, kwargs)
            return builtin(*args, **kwargs)

        return lipsum

