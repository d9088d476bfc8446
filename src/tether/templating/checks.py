"""Size checks made *before* an operation that could allocate without bound.

Each check estimates the size of the result from its operands and refuses it (TemplateLimit)
when it would be over the cap, so ``'a' * (3 * 10**9)``, ``9 ** (9 ** 9)``, ``'x'|center(10**9)``
or ``'{:>999999999}'.format(1)`` never start. Results are charged after they are computed
as well (:meth:`~tether.templating.meter.Meter.charge`); these checks stop the operations
whose result would be far larger than their operands.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

from tether.errors import TemplateLimit
from tether.templating.meter import MAX_INT_BITS, MAX_INT_DIGITS, Meter, size_of, text_size

_REPEATABLE = (str, bytes, list, tuple)  # what `*` repeats and `+` joins
_NUMBERS = re.compile(r"\d+")
_CONVERSION = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?([a-zA-Z%])")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _too_big_int(bits: int, what: str) -> None:
    if bits > MAX_INT_BITS:
        raise TemplateLimit("size", f"{what} would have more than {MAX_INT_DIGITS:,} digits")


# -- operators -----------------------------------------------------------------------------------


def check_power(meter: Meter, base: Any, exponent: Any) -> None:
    if _int(base) and _int(exponent) and exponent > 0 and abs(base) > 1:
        # an estimate from the bit lengths, without computing anything large
        _too_big_int(exponent * (abs(base).bit_length() - 1), "`**`")


def check_multiply(meter: Meter, left: Any, right: Any) -> None:
    if _int(left) and _int(right):
        _too_big_int(left.bit_length() + right.bit_length() - 1, "`*`")
    elif isinstance(left, _REPEATABLE) and _int(right):
        meter.allow(len(left) * right, "`*`")
    elif _int(left) and isinstance(right, _REPEATABLE):
        meter.allow(left * len(right), "`*`")


def check_add(meter: Meter, left: Any, right: Any) -> None:
    if isinstance(left, _REPEATABLE) and isinstance(right, _REPEATABLE):
        meter.allow(len(left) + len(right), "`+`")


def check_modulo(meter: Meter, left: Any, right: Any) -> None:
    if isinstance(left, str):
        check_percent_format(meter, left, right)


def check_percent_format(meter: Meter, text: str, args: Any) -> None:
    """``text % args``: widths and precisions within the cap, the result estimated."""
    values = list(args.values()) if isinstance(args, dict) else (
        list(args) if isinstance(args, tuple) else [args])
    conversions = _CONVERSION.findall(text)
    for width, precision, _ in conversions:
        for number in (width, precision):
            if number == "*":
                meter.allow(max((v for v in values if _int(v)), default=0), "a `*` width")
            elif number:
                meter.allow(int(number), "a format width")
    widest = max((text_size(v, meter.limit) for v in values), default=0)
    meter.allow(len(text) + len(conversions) * widest, "formatting")


BINOP_CHECKS: dict[str, Callable[[Meter, Any, Any], None]] = {
    "**": check_power, "*": check_multiply, "+": check_add, "%": check_modulo,
}


def check_format_spec(meter: Meter, spec: str) -> None:
    """A ``str.format`` field's spec: no width or precision over the cap."""
    for number in _NUMBERS.findall(spec):
        meter.allow(int(number), "a format width")


# -- text the template builds --------------------------------------------------------------------


def check_join(meter: Meter, separator: str, items: list[Any]) -> None:
    total = len(separator) * max(len(items) - 1, 0)
    meter.allow(total, "joining")
    for item in items:
        total += text_size(item, meter.limit)
        meter.allow(total, "joining")


def check_replace(meter: Meter, text: str, old: str, new: str, count: int = -1) -> None:
    if len(new) <= len(old):
        return
    found = text.count(old) if old else len(text) + 1
    if count is not None and count >= 0:
        found = min(found, count)
    meter.allow(len(text) + found * (len(new) - len(old)), "`replace`")


def check_stringify(meter: Meter, value: Any, what: str) -> None:
    if not isinstance(value, str):
        meter.allow(text_size(value, meter.limit), what)


def materialise(meter: Meter, items: Any) -> list[Any]:
    """An iterable as a list, a step of work per item (it may be a generator)."""
    result = []
    for item in items:
        meter.step()
        result.append(item)
    return result


# -- methods of strings --------------------------------------------------------------------------


def check_str_method(meter: Meter, text: str | bytes, name: str,
                     args: tuple[Any, ...]) -> tuple[Any, ...]:
    """Check a call of a string's method; return its arguments (materialised for ``join``)."""
    if name in ("ljust", "rjust", "center", "zfill") and args and _int(args[0]):
        meter.allow(args[0], f"`{name}`")
    elif name == "expandtabs":
        size = args[0] if args and _int(args[0]) else 8
        tabs = text.count("\t") if isinstance(text, str) else text.count(b"\t")
        meter.allow(len(text) + tabs * max(size, 0), "`expandtabs`")
    elif name == "join" and args:
        items = materialise(meter, args[0])
        check_join(meter, str(text), items)
        return (items, *args[1:])
    elif name == "replace" and len(args) >= 2 and isinstance(text, str):
        old, new = args[0], args[1]
        if isinstance(old, str) and isinstance(new, str):
            check_replace(meter, text, old, new, args[2] if len(args) > 2 else -1)
    elif name == "translate" and args and isinstance(args[0], dict) and isinstance(text, str):
        longest = max((len(v) for v in args[0].values() if isinstance(v, str)), default=1)
        meter.allow(len(text) * longest, "`translate`")
    return args


# -- filters -------------------------------------------------------------------------------------
# A check takes the meter, the filter's value and its other arguments, and returns the value
# (a generator is made a list where the filter would consume it anyway).

FilterCheck = Callable[[Meter, Any, tuple[Any, ...], dict[str, Any]], Any]


def _arg(args: tuple[Any, ...], kwargs: dict[str, Any], index: int, name: str,
         default: Any) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _join(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    items = materialise(meter, value)
    separator = str(_arg(args, kwargs, 0, "d", ""))
    if _arg(args, kwargs, 1, "attribute", None) is None:
        check_join(meter, separator, items)
    else:
        meter.allow(len(separator) * max(len(items) - 1, 0), "joining")
    return items


def _replace(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    old, new = _arg(args, kwargs, 0, "old", ""), _arg(args, kwargs, 1, "new", "")
    count = _arg(args, kwargs, 2, "count", None)
    check_stringify(meter, value, "`replace`")
    check_replace(meter, str(value), str(old), str(new), count if _int(count) else -1)
    return value


def _center(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    check_stringify(meter, value, "`center`")
    width = _arg(args, kwargs, 0, "width", 80)
    if _int(width):
        meter.allow(width, "`center`")
    return value


def _indent(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    check_stringify(meter, value, "`indent`")
    width = _arg(args, kwargs, 0, "width", 4)
    per_line = len(width) if isinstance(width, str) else width if _int(width) else 0
    text = str(value)
    meter.allow(len(text) + (text.count("\n") + 1) * max(per_line, 0), "`indent`")
    return value


def _format(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    check_stringify(meter, value, "`format`")
    check_percent_format(meter, str(value), kwargs or tuple(args))
    return value


def _wordwrap(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    check_stringify(meter, value, "`wordwrap`")
    text = str(value)
    width = _arg(args, kwargs, 0, "width", 79)
    wrap = _arg(args, kwargs, 2, "wrapstring", None)
    lines = len(text) // max(width if _int(width) else 1, 1) + text.count("\n") + 1
    meter.allow(len(text) + lines * len(str(wrap or "\n")), "`wordwrap`")
    return value


def _urlize(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    check_stringify(meter, value, "`urlize`")
    extra = sum(len(str(_arg(args, kwargs, i, name, "") or ""))
                for i, name in ((2, "target"), (3, "rel")))
    size = len(str(value))
    meter.allow(4 * size + (size // 4 + 1) * extra, "`urlize`")
    return value


def _count_arg(index: int, name: str, default: Any) -> FilterCheck:
    """A check that the argument ``name`` (a count of things to make) is within the cap."""
    def check(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        count = _arg(args, kwargs, index, name, default)
        if _int(count):
            meter.allow(count, f"`{name}`")
        return value
    return check


def _tojson(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    indent = _arg(args, kwargs, 0, "indent", None)
    meter.allow(text_size(value, meter.limit) * (1 + (indent if _int(indent) else 0)), "`tojson`")
    return value


def _stringify(name: str) -> FilterCheck:
    def check(meter: Meter, value: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        check_stringify(meter, value, f"`{name}`")
        return value
    return check


FILTER_CHECKS: dict[str, FilterCheck] = {
    "join": _join, "replace": _replace, "center": _center, "indent": _indent,
    "format": _format, "wordwrap": _wordwrap, "urlize": _urlize, "tojson": _tojson,
    "batch": _count_arg(0, "linecount", 1), "slice": _count_arg(0, "slices", 1),
    "truncate": _stringify("truncate"), "filesizeformat": _stringify("filesizeformat"),
    **{name: _stringify(name) for name in (
        "string", "pprint", "escape", "e", "forceescape", "safe", "striptags", "title",
        "upper", "lower", "capitalize", "trim", "urlencode", "wordcount", "xmlattr")},
}


def check_lipsum(meter: Meter, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """``lipsum(n, html, min, max)`` writes ``n`` paragraphs of up to ``max`` words."""
    n = _arg(args, kwargs, 0, "n", 5)
    words = _arg(args, kwargs, 3, "max", 100)
    if _int(n) and _int(words):
        meter.allow(n * words * 12, "`lipsum`")


def linear_sum(meter: Meter, items: list[Any], start: list[Any] | tuple[Any, ...]) -> Any:
    """``sum(items, start)`` of lists (or tuples) in linear time: the builtin copies the
    running total at every step, which is quadratic in the number of items."""
    meter.allow(len(start) + sum(size_of(item) for item in items), "`sum`")
    return type(start)(itertools.chain(start, *items))


__all__ = ["BINOP_CHECKS", "FILTER_CHECKS", "check_format_spec", "check_join", "check_lipsum",
           "check_str_method", "linear_sum", "materialise"]
