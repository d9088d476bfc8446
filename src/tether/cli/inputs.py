"""Reading the values an operator gives on the command line, within fixed budgets.

``--input NAME=JSON``, ``--value JSON``, ``--patch JSON`` and ``--inputs-file FILE`` are
parsed here, and whatever they hold (huge, deeply nested, an alias bomb, a 5,000-digit
number, invalid UTF-8, a FIFO or ``/dev/zero``) ends as one :class:`click.BadParameter`
(exit 2) naming the option, never as a ``RecursionError``, a ``MemoryError`` or a hang.
The limits are the workflow reader's: 64 levels of nesting, and no number JSON cannot print.
"""

from __future__ import annotations

import json
import math
import os
import stat
from typing import Any

import click

from tether.cli.terminal import printable

MAX_JSON_CHARS = 1_000_000           # one --input/--value/--patch value
MAX_FILE_BYTES = 10_000_000          # an --inputs-file
MAX_DEPTH = 64                       # as workflow files
MAX_VALUES = 100_000                 # values in one document, YAML aliases expanded
MAX_INT_BITS = 14_000                # about 4,200 decimal digits: Python prints up to 4,300


def _fail(option: str, message: str) -> click.BadParameter:
    return click.BadParameter(printable(message), param_hint=option)


# --------------------------------------------------------------------------- JSON


def parse_json(raw: str, option: str) -> Any:
    """A JSON value given on the command line, checked against the budgets."""
    if len(raw) > MAX_JSON_CHARS:
        raise _fail(option, f"the value is {len(raw):,} characters long; the limit is "
                            f"{MAX_JSON_CHARS:,} (use --inputs-file for large inputs)")
    try:
        value = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise _fail(option, f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise _fail(option, f"nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:  # a number beyond 4,300 digits, or one that is not finite
        raise _fail(option, _number_problem(exc)) from None
    check_value(value, option)
    return value


def _number_problem(exc: ValueError) -> str:
    return "a number has more than 4,300 digits" if "digits" in str(exc) else str(exc)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"{text[:40]} is too large for a JSON number")
    return value


def parse_object(raw: str, option: str, example: str) -> dict[str, Any]:
    """A JSON object given on the command line (``--value``, ``--patch``)."""
    value = parse_json(raw, option)
    if not isinstance(value, dict):
        raise _fail(option, f"must be a JSON object, e.g. {example}")
    return value


def check_value(value: Any, option: str) -> None:
    """Refuse a value nested deeper than :data:`MAX_DEPTH`, holding more than
    :data:`MAX_VALUES` values, or text that is not Unicode (a lone surrogate such as the JSON
    escape ``\\ud800``, which no store can keep). Walked without recursion."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    count = 0
    while stack:
        item, depth = stack.pop()
        count += 1
        if depth > MAX_DEPTH:
            raise _fail(option, f"nested more than {MAX_DEPTH} levels deep")
        if count > MAX_VALUES:
            raise _fail(option, f"holds more than {MAX_VALUES:,} values")
        if isinstance(item, str):
            _check_text(item, option)
        elif isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            stack.extend((k, depth + 1) for k in item)
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif isinstance(item, int) and item.bit_length() > MAX_INT_BITS:
            raise _fail(option, "a number has more than 4,200 digits")


def _check_text(item: str, option: str) -> None:
    if not item.isascii():
        try:
            item.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _fail(option, f"holds a lone surrogate ({item[exc.start]!a}), which "
                                "is not text") from None


# --------------------------------------------------------------------------- files


def read_file(path: str, option: str) -> str:
    """The UTF-8 text of a regular file of at most :data:`MAX_FILE_BYTES`.

    Opened without blocking (a FIFO with no writer does not hang) and checked with
    ``fstat`` on the open descriptor: devices (a link to ``/dev/zero``), FIFOs and
    directories are refused before anything is read."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        raise _fail(option, f"cannot open {path}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise _fail(option, f"{path} is not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise _fail(option, f"{path} is {info.st_size:,} bytes; the limit is "
                                f"{MAX_FILE_BYTES:,}")
        data = os.read(descriptor, MAX_FILE_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(data) > MAX_FILE_BYTES:
        raise _fail(option, f"{path} is larger than {MAX_FILE_BYTES:,} bytes")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _fail(option, f"{path} is not valid UTF-8 (byte 0x{data[exc.start]:02x} at "
                            f"offset {exc.start})") from None
    if "\x00" in text:
        raise _fail(option, f"{path} contains a NUL character (is it a binary file?)")
    return text


def read_inputs_file(path: str, option: str = "--inputs-file") -> dict[str, Any]:
    """The mapping of input values in a JSON (``.json``) or YAML file."""
    text = read_file(path, option)
    if path.lower().endswith(".json"):
        value = parse_json_document(text, path, option)
    else:
        try:
            value = load_yaml(text)
        except ValueError as exc:
            raise _fail(option, f"{path}: {exc}") from None
    if not isinstance(value, dict):
        raise _fail(option, f"{path} must hold a mapping of input names to values")
    return value


def parse_json_document(text: str, path: str, option: str) -> Any:
    """A JSON file's value, under the same budgets as a value on the command line."""
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except json.JSONDecodeError as exc:
        raise _fail(option, f"{path}:{exc.lineno}:{exc.colno}: not valid JSON: "
                            f"{exc.msg}") from None
    except RecursionError:
        raise _fail(option, f"{path} is nested more than {MAX_DEPTH} levels deep") from None
    except ValueError as exc:
        raise _fail(option, f"{path}: {_number_problem(exc)}") from None
    check_value(value, option)
    return value


# --------------------------------------------------------------------------- YAML


def load_yaml(text: str) -> Any:
    """Plain JSON-like data from YAML text, or ValueError saying what is wrong.

    PyYAML composes the node graph (linear in the text: an alias is a reference, not a copy);
    walking it here counts every value an alias expands to, so an alias bomb stops at
    :data:`MAX_VALUES`; nesting stops at :data:`MAX_DEPTH`; only JSON scalars are accepted.
    """
    import yaml

    loader: type = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        node = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise ValueError(f"{where}YAML syntax error: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"YAML error: {exc}") from None
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep") from None
    return None if node is None else _YAMLWalker().value(node, 0)


_COLLECTIONS = ("tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")


class _YAMLWalker:
    def __init__(self) -> None:
        from yaml.constructor import SafeConstructor

        self.constructor = SafeConstructor()
        self.count = 0

    def value(self, node: Any, depth: int) -> Any:
        import yaml

        self.count += 1
        if depth > MAX_DEPTH:
            raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
        if self.count > MAX_VALUES:
            raise ValueError(f"expands to more than {MAX_VALUES:,} values (YAML aliases?)")
        if isinstance(node, yaml.CollectionNode) and node.tag not in _COLLECTIONS:
            raise ValueError(f"line {node.start_mark.line + 1}: the tag {node.tag} has no "
                             "JSON form")
        if isinstance(node, yaml.MappingNode):
            return self.mapping(node, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.value(item, depth + 1) for item in node.value]
        return self.scalar(node)

    def mapping(self, node: Any, depth: int) -> dict[str, Any]:
        import yaml

        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            where = f"line {key_node.start_mark.line + 1}"
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag.endswith(":merge"):
                raise ValueError(f"{where}: a key must be a plain string (no << merge keys)")
            key = str(key_node.value)
            if key in result:
                raise ValueError(f"{where}: duplicate key {key!r}")
            result[key] = self.value(value_node, depth + 1)
        return result

    def scalar(self, node: Any) -> Any:
        where = f"line {node.start_mark.line + 1}"
        if node.tag == "tag:yaml.org,2002:timestamp":
            return str(node.value)
        if node.tag.rpartition(":")[2] not in ("null", "bool", "int", "float", "str"):
            raise ValueError(f"{where}: the tag {node.tag} has no JSON form")
        try:
            value = self.constructor.construct_object(node)
        except ValueError:  # more digits than Python converts
            raise ValueError(f"{where}: a number has more than 4,300 digits") from None
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{where}: {node.value[:40]} is not a JSON number")
        if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
            raise ValueError(f"{where}: a number has more than 4,200 digits")
        return value
