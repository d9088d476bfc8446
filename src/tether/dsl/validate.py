"""Validate front-end data against the format models; map pydantic errors to our diagnostics.

This is the one boundary where pydantic's ``ValidationError`` is caught. Every error becomes a
diagnostic with our code, our wording and the span of the offending key or value. When the
document has errors, the broken parts (a whole node, a whole input) are set aside and the rest
validated again, so the compiler can still report graph and template problems in the same pass.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_core import ErrorDetails, ValidationError

from tether.diagnostics import Diagnostic, Related, make
from tether.dsl.document_rules import FORMAT_VERSION, INPUT_TYPES
from tether.dsl.matrix_checks import check_matrix_entries
from tether.dsl.patterns import ID_RE, NODE_ID_RE, SECRET_RE
from tether.dsl.source import Path, RawDocument, SourceMap
from tether.dsl.timer_checks import check_timers
from tether.durations import DURATION_RE, MAX_SECONDS, DurationError, parse_duration
from tether.jsontypes import article, json_type_name, matches_type
from tether.kinds import KIND_KEYS, KIND_NAMES, KINDS
from tether.suggest import did_you_mean

if TYPE_CHECKING:
    from tether.dsl.document import WorkflowDoc

_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "bool_type": "a boolean (true or false)",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
    "list_type": "a list",
}






def describe(path: Path) -> str:
    """Where a path is, in words: ``in node `a```, ``in the loop of node `a```."""
    if len(path) >= 2 and path[0] == "nodes":
        where = f"node `{path[1]}`"
        rest = path[2:]
        if rest and rest[0] in ("loop", "retry", "approval", "agent", "switch"):
            where = f"the {rest[0]} of {where}"
            if rest[0] == "approval" and len(rest) >= 3 and rest[1] == "form":
                where = f"form field `{rest[2]}` of node `{path[1]}`"
            if rest[0] == "agent" and len(rest) >= 2 and rest[1] == "model":
                where = f"the model of node `{path[1]}`"
        return f"in {where}"
    if len(path) >= 2 and path[0] == "inputs":
        return f"in input `{path[1]}`"
    if path and path[0] == "schedule":
        return "in the schedule"
    if path and path[0] == "concurrency":
        return "in the concurrency key"
    if path and path[0] == "on":
        return {"webhook": "in the webhook", "schedule": "in the schedule",
                "manual": "in `on.manual`"}.get(
            str(path[1]) if len(path) > 1 else "", "in `on`")
    return "at the top level"


# The model that validates the mapping under a key of another model's mapping.
_NESTED: dict[tuple[str, str], str] = {
    ("WorkflowDoc", "schedule"): "ScheduleSpec", ("WorkflowDoc", "on"): "TriggersSpec",
    ("WorkflowDoc", "concurrency"): "ConcurrencySpec", ("TriggersSpec", "webhook"): "WebhookSpec",
    ("TriggersSpec", "schedule"): "ScheduleSpec", ("TriggersSpec", "manual"): "ManualSpec",
    ("NodeSpec", "retry"): "RetryPolicy", ("NodeSpec", "loop"): "LoopSpec",
    ("NodeSpec", "approval"): "ApprovalSpec", ("NodeSpec", "agent"): "AgentSpec",
    ("NodeSpec", "switch"): "SwitchSpec", ("AgentSpec", "model"): "ModelRef",
    ("AgentSpec", "max_tool_calls"): "ToolCallLimitsSpec",
}
# ... and under a key of a mapping of such mappings (`nodes.<id>`, `inputs.<name>`, ...).
_NESTED_BY_NAME: dict[tuple[str, str], str] = {
    ("WorkflowDoc", "nodes"): "NodeSpec", ("WorkflowDoc", "inputs"): "InputSpec",
    ("ApprovalSpec", "form"): "InputSpec",
}


def _model_at(path: Path) -> str | None:
    """The name of the format model that validates the mapping at ``path``."""
    model = "WorkflowDoc"
    steps = list(path)
    while steps:
        key = str(steps.pop(0))
        if (model, key) in _NESTED:
            model = _NESTED[model, key]
        elif (model, key) in _NESTED_BY_NAME and steps:
            steps.pop(0)
            model = _NESTED_BY_NAME[model, key]
        else:
            return None
    return model


def _field_names(model: str) -> list[str]:
    from tether.dsl.document_schema import FIELDS

    return list(FIELDS[model])


@dataclass
class _Mapper:
    source: SourceMap
    diagnostics: list[Diagnostic] = field(default_factory=list)

    def add(self, code: str, message: str, path: Path, *, key: bool = False,
            help: str | None = None, related: tuple[tuple[Path, str], ...] = ()) -> None:
        span = self.source.key(path) if key else self.source.value(path)
        node_id = str(path[1]) if len(path) >= 2 and path[0] == "nodes" else None
        notes = [Related(self.source.value(at), note) for at, note in related]
        self.diagnostics.append(make(code, message, span, help=help, node_id=node_id,
                                     related=notes))

    def error(self, err: ErrorDetails) -> None:
        path: Path = tuple(err["loc"])
        name = str(path[-1]) if path else "document"
        kind = err["type"]
        parent = path[:-1]
        if kind == "missing":
            code = "E304" if path[-2:-1] == ("loop",) and name == "max_iterations" else "E200"
            what = describe(parent) if len(parent) > 1 else "at the top level"
            self.add(code, f"missing required key `{name}` {what}", parent, key=True)
        elif kind == "extra_forbidden":
            model = _model_at(parent)
            known = _field_names(model) if model is not None else []
            help = _other_tools_key(name, known) or did_you_mean(name, known) or (
                "known keys: " + ", ".join(f"`{k}`" for k in known) if known else None
            )
            self.add("E201", f"unknown key `{name}` {describe(parent)}", path, key=True, help=help)
        elif kind == "manual_type":
            got = json_type_name(err["input"])
            self.add("E202", f"`manual` must be true, false or a mapping with `users`, not "
                     f"{got}", path)
        elif kind == "count_type":
            got = json_type_name(err["input"])
            self.add("E202", f"`{name}` must be an integer or an expression, not {got}", path)
        elif kind in _TYPE_NAMES:
            got = json_type_name(err["input"])
            self.add("E202", f"`{name}` must be {_TYPE_NAMES[kind]}, not {got}", path)
        elif kind == "literal_error":
            expected = err.get("ctx", {}).get("expected", "")
            allowed = re.findall(r"'([^']*)'", str(expected))
            value = err["input"]
            help = did_you_mean(str(value), allowed) if isinstance(value, str) else None
            shown = f"`{value}`" if isinstance(value, str) else json_type_name(value)
            self.add("E203", f"`{name}` must be one of {', '.join(allowed)}; got {shown}",
                     path, help=help)
        elif kind in ("greater_than_equal", "greater_than"):
            code = "E304" if name == "max_iterations" else "E203"
            self.add(code, f"`{name}` must be at least 1, not {err['input']}", path)
        elif kind == "too_short" and path == ("nodes",):
            self.add("E203", "a workflow needs at least one node", path)
        else:
            self.add("E203", f"invalid `{name}` {describe(parent)}: {err['msg'].lower()}", path)


_COUNT_BRANCHES = {"constrained-int": "int", "str": "str"}


def _merge_count_errors(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """A count (an integer, or an expression) fails as two union branches: report the
    integer's error at the key itself, and the string branch not at all."""
    merged: list[ErrorDetails] = []
    for err in errors:
        loc = tuple(err["loc"])
        branch = _COUNT_BRANCHES.get(str(loc[-1])) if len(loc) >= 2 else None
        if branch is None or loc[-2] not in ("max_iterations", "concurrency"):
            merged.append(err)
        elif branch == "int":
            fixed = dict(err)
            fixed["loc"] = loc[:-1]
            if err["type"] in ("int_type", "int_parsing"):
                fixed["type"] = "count_type"
            merged.append(fixed)  # type: ignore[arg-type]
    return merged


def _merge_manual_errors(errors: list[ErrorDetails]) -> list[ErrorDetails]:
    """``on.manual`` (true, or a mapping) fails as two union branches: a mapping's errors are
    reported at their keys (the branch's name dropped from the path); any other value once,
    as a type error of ``manual`` itself."""
    merged: list[ErrorDetails] = []
    other = False
    for err in errors:
        loc = tuple(err["loc"])
        if loc[:2] != ("on", "manual") or len(loc) < 3:
            merged.append(err)
        elif loc[2] == "ManualSpec" and err["type"] not in ("model_type",
                                                            "model_attributes_type"):
            fixed = dict(err)
            fixed["loc"] = (*loc[:2], *loc[3:])
            merged.append(fixed)  # type: ignore[arg-type]
        elif not other and loc[2] == "bool" and not isinstance(err["input"], dict):
            other = True
            fixed = dict(err)
            fixed["loc"], fixed["type"] = loc[:2], "manual_type"
            merged.append(fixed)  # type: ignore[arg-type]
    return merged


def _set_aside(data: dict[str, Any], errors: list[ErrorDetails]) -> tuple[set[str], set[str]]:
    """Remove the parts of ``data`` that failed validation; return the broken node/input ids."""
    broken_nodes: set[str] = set()
    broken_inputs: set[str] = set()
    for err in errors:
        loc = err["loc"]
        if len(loc) >= 2 and loc[0] in ("nodes", "inputs"):
            target = broken_nodes if loc[0] == "nodes" else broken_inputs
            target.add(str(loc[1]))
            section = data.get(str(loc[0]))
            if isinstance(section, dict):
                section.pop(str(loc[1]), None)
        elif len(loc) >= 1:
            defaults: dict[str, Any] = {"tether": FORMAT_VERSION, "name": "workflow"}
            if loc[0] in defaults:
                data[str(loc[0])] = defaults[str(loc[0])]
            elif loc[0] != "nodes":
                data.pop(str(loc[0]), None)
    return broken_nodes, broken_inputs


@dataclass
class Validated:
    """The result of validation: the document (possibly partial) and what was set aside."""

    doc: WorkflowDoc | None
    broken_nodes: frozenset[str] = frozenset()
    broken_inputs: frozenset[str] = frozenset()
    broken_reads: frozenset[str] = frozenset()
    """The inputs the templates of set-aside nodes mention (so they are not reported unused)."""


def document_validator(light: bool) -> Callable[[Any], WorkflowDoc]:
    """What validates a document: pydantic-core with the generated schema and light classes
    when ``light`` (``tether check``: no pydantic import) and the installed pydantic-core is
    the one it was generated with, else the pydantic model (:mod:`tether.dsl.document`)."""
    if light:
        from tether.dsl.document_light import light_validator

        validator = light_validator()
        if validator is not None:
            return validator.validate_python
    from tether.dsl.document import WorkflowDoc

    return WorkflowDoc.model_validate


def validate(raw: RawDocument, *, light: bool = False) -> Validated:
    """Validate ``raw.data``; diagnostics are appended to ``raw.diagnostics``.

    ``light``: the document may be made of the light classes of
    :mod:`tether.dsl.document_light` (for a check, which builds no plan from it)."""
    mapper = _Mapper(raw.source)
    data = raw.data
    if not isinstance(data, dict):
        if data is not None or raw.ok:
            mapper.add("E209", f"a workflow file holds a mapping, not {json_type_name(data)}", ())
        raw.diagnostics.extend(mapper.diagnostics)
        return Validated(None)
    data = dict(data)
    broken_nodes: set[str] = set()
    broken_inputs: set[str] = set()
    doc: WorkflowDoc | None = None
    validator = document_validator(light)
    for _ in range(2):
        try:
            doc = validator(data)
            break
        except ValidationError as exc:
            errors = _merge_manual_errors(_merge_count_errors(exc.errors()))
            if not broken_nodes and not broken_inputs and not mapper.diagnostics:
                for err in errors:
                    mapper.error(err)
            data = {k: (dict(v) if isinstance(v, dict) else v) for k, v in data.items()}
            nodes, inputs = _set_aside(data, errors)
            broken_nodes |= nodes
            broken_inputs |= inputs
    _check_document(raw.data, mapper)
    raw.diagnostics.extend(mapper.diagnostics)
    reads = _inputs_mentioned([raw.data["nodes"][n] for n in broken_nodes
                               if isinstance(raw.data.get("nodes"), dict)
                               and n in raw.data["nodes"]])
    return Validated(doc, frozenset(broken_nodes), frozenset(broken_inputs), reads)


_INPUT_READ = re.compile(r"""\binputs\s*(?:\.\s*([A-Za-z_]\w*)|\[\s*['"]([^'"]+)['"])""")


def _inputs_mentioned(values: list[Any]) -> frozenset[str]:
    """Every ``inputs.NAME`` (or ``inputs['NAME']``) in the strings of ``values``."""
    found: set[str] = set()
    stack: list[Any] = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, str) and "inputs" in value:
            found.update(a or b for a, b in _INPUT_READ.findall(value))
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return frozenset(found)


def _check_document(data: dict[str, Any], mapper: _Mapper) -> None:
    """Checks the models cannot express: version, ids, node kinds, durations, defaults.

    They read the raw data, so nodes set aside for schema errors are checked too.
    """
    if isinstance(data.get("tether"), int) and data["tether"] != FORMAT_VERSION:
        mapper.add("E204", f"unsupported format version {data['tether']}", ("tether",),
                   help=f"this release of tether reads `tether: {FORMAT_VERSION}`")
    for name, spec in _entries(data.get("inputs")):
        _check_id(mapper, name, ("inputs", name), "input name")
        _check_default(mapper, spec, ("inputs", name))
    for node_id, node in _entries(data.get("nodes")):
        _check_node_id(mapper, node_id)
        _check_node(mapper, node_id, node)
    if isinstance(data.get("secrets"), list):
        _check_secrets(mapper, data["secrets"])


def _check_secrets(mapper: _Mapper, names: list[Any]) -> None:
    first: dict[str, int] = {}
    for i, name in enumerate(names):
        if not isinstance(name, str):
            continue
        if not SECRET_RE.match(name):
            suggestion = re.sub(r"[^A-Z0-9_]", "_", name.upper()) or "KEY"
            suggestion = "_" + suggestion if suggestion[0].isdigit() else suggestion
            mapper.add("E800", f"invalid secret name `{name}`", ("secrets", i),
                       help="a secret is named like an environment variable: upper-case "
                       f"letters, digits and underscores, e.g. `{suggestion}`")
        elif name in first:
            mapper.add("E800", f"secret `{name}` is declared twice", ("secrets", i),
                       related=((("secrets", first[name]), f"`{name}` is first declared here"),),
                       help="remove one of them")
        else:
            first[name] = i


def _entries(section: object) -> list[tuple[str, dict[str, Any]]]:
    if not isinstance(section, dict):
        return []
    return [(k, v) for k, v in section.items() if isinstance(v, dict)]


def _check_id(mapper: _Mapper, name: str, path: Path, what: str) -> None:
    if not ID_RE.match(name):
        suggestion = re.sub(r"[^a-z0-9_]", "_", name.lower()).lstrip("_0123456789") or "x"
        mapper.add("E206", f"invalid {what} `{name}`", path, key=True,
                   help=f"use lowercase letters, digits and underscores, e.g. `{suggestion}`")



def _check_node_id(mapper: _Mapper, node_id: str) -> None:
    if not NODE_ID_RE.match(node_id):
        suggestion = re.sub(r"[^A-Za-z0-9_-]", "-", node_id).strip("-_0123456789") or "x"
        mapper.add("E206", f"invalid node id `{node_id}`", ("nodes", node_id), key=True,
                   help="a node id starts with a letter and holds letters, digits, `_` and "
                   f"`-`, e.g. `{suggestion}`")


def _check_default(mapper: _Mapper, spec: dict[str, Any], path: Path) -> None:
    type_name, default = spec.get("type"), spec.get("default")
    if type_name not in INPUT_TYPES:
        return
    enum = spec.get("enum")
    if isinstance(enum, list):
        enum = _check_enum(mapper, enum, str(type_name), path)
    if default is None:
        return
    if not matches_type(default, str(type_name)):
        mapper.add("E500", f"the default of `{path[-1]}` must be {article(str(type_name))}, "
                   f"not {json_type_name(default)}", (*path, "default"))
    elif isinstance(enum, list) and enum and default not in enum:
        mapper.add("E203", f"the default of `{path[-1]}` is not one of its `enum` values",
                   (*path, "default"), help="allowed: " + _shown_values(enum))


def _check_enum(mapper: _Mapper, enum: list[Any], type_name: str, path: Path) -> list[Any]:
    """An ``enum`` lists at least one value, each of the declared type, none twice; returns
    the valid values."""
    if not enum:
        mapper.add("E203", f"the `enum` of `{path[-1]}` lists no value", (*path, "enum"),
                   help="list the allowed values, or remove `enum`")
    seen: list[Any] = []
    for i, item in enumerate(enum):
        if item is None or not matches_type(item, type_name):
            mapper.add("E203", f"`enum` value {_shown_values([item])} of `{path[-1]}` must be "
                       f"{article(type_name)}, not {json_type_name(item)}", (*path, "enum", i))
        elif item in seen:
            mapper.add("E203", f"`enum` value {_shown_values([item])} of `{path[-1]}` is "
                       "listed twice", (*path, "enum", i))
        else:
            seen.append(item)
    return seen


def _shown_values(values: list[Any]) -> str:
    return ", ".join(json.dumps(v, ensure_ascii=False)[:60] for v in values[:20]) + (
        ", ..." if len(values) > 20 else "")


def _check_node(mapper: _Mapper, node_id: str, node: dict[str, Any]) -> None:
    path: Path = ("nodes", node_id)
    given = [kind for kind, key in KIND_KEYS if node.get(key) is not None]
    if len(given) != 1:
        message = (f"node `{node_id}` has none of {', '.join(KIND_NAMES)}" if not given
                   else f"node `{node_id}` has {' and '.join(given)}; a node has exactly one")
        mapper.add("E205", message, path, key=True,
                   help="give exactly one of " + ", ".join(f"`{k}:`" for k in KIND_NAMES))
    kind = KINDS[given[0]] if len(given) == 1 else None
    if kind is not None:
        for key in kind.refuses:
            if key in node:
                mapper.add("E208", f"`{key}` does not apply to {kind.noun}", (*path, key),
                           key=True)
    fans = node.get("for_each") is not None or node.get("matrix") is not None
    for key in ("concurrency", "fail_fast"):
        if key in node and not fans and (kind is None or kind.takes(key)):
            mapper.add("E208", f"`{key}` applies only together with `for_each` or `matrix`",
                       (*path, key), key=True, help="add `for_each:` or remove it")
    if node.get("for_each") is not None and node.get("matrix") is not None:
        mapper.add("E212", f"node `{node_id}` has both `for_each` and `matrix`",
                   (*path, "matrix"), key=True,
                   help="a matrix is a for_each over combinations: keep one of them")
    if node.get("noop") is False:
        mapper.add("E203", "`noop` takes only `true`", (*path, "noop"),
                   help="remove the node, or give it another kind")
    if node.get("until") is not None and (kind is None or kind.takes("until")) and not (
            isinstance(node.get("retry"), dict) and "max_attempts" in node["retry"]):
        mapper.add("E210", f"`until` of node `{node_id}` has no bound", (*path, "until"),
                   key=True, help="add `retry: {max_attempts: N, backoff: 30s}`: the task is "
                   "called at most N times")
    if isinstance(node.get("matrix"), dict):
        _check_matrix(mapper, node["matrix"], (*path, "matrix"))
        check_matrix_entries(mapper.add, node_id, node["matrix"], (*path, "matrix"))
    if isinstance(node.get("timeout"), str) and "{{" not in node["timeout"]:
        _check_duration(mapper, node["timeout"], (*path, "timeout"))
    retry = node.get("retry")
    if isinstance(retry, dict) and isinstance(retry.get("backoff"), str):
        _check_duration(mapper, retry["backoff"], (*path, "retry", "backoff"))
    approval = node.get("approval")
    if isinstance(approval, dict):
        for name, spec in _entries(approval.get("form")):
            field_path: Path = (*path, "approval", "form", name)
            _check_id(mapper, name, field_path, "form field")
            _check_default(mapper, spec, field_path)
    check_timers(mapper.add, node_id, node, path)
    for_each = node.get("for_each")
    if isinstance(for_each, dict | bool | int | float):
        mapper.add("E202", f"`for_each` must be a list or an expression, "
                   f"not {json_type_name(for_each)}", (*path, "for_each"))


# Keys other tools use for what tether spells differently (GitHub Actions, Argo, Compose),
# which no spelling distance finds: `if` is two letters from nothing.
_OTHER_TOOLS = {"if": ("when", "GitHub Actions' `if`"), "depends_on": ("needs", "`depends_on`"),
                "dependencies": ("needs", "Argo's `dependencies`")}


def _other_tools_key(name: str, known: list[str]) -> str | None:
    found = _OTHER_TOOLS.get(name)
    if found is None or found[0] not in known:
        return None
    return f"did you mean `{found[0]}`? ({found[1]} is tether's `{found[0]}`)"


def _check_matrix(mapper: _Mapper, matrix: dict[str, Any], path: Path) -> None:
    """Axes are lists (or expressions); ``include`` and ``exclude`` lists of mappings."""
    for axis, values in matrix.items():
        if axis in ("include", "exclude"):
            if not isinstance(values, list) or not all(isinstance(v, dict) for v in values):
                mapper.add("E211", f"`matrix.{axis}` must be a list of mappings "
                           "(axis: value)", (*path, axis),
                           help=f"for example `{axis}: [{{os: linux, python: '3.12'}}]`")
        elif not isinstance(values, list) and not (isinstance(values, str) and "{{" in values):
            mapper.add("E211", f"matrix axis `{axis}` must be a list, not "
                       f"{json_type_name(values)}", (*path, axis),
                       help=f"write `{axis}: [a, b]` (or an expression giving a list)")


def _check_duration(mapper: _Mapper, text: str, path: Path) -> None:
    try:
        parse_duration(text)
    except DurationError:
        mapper.add("E207", f"invalid duration `{text}`", path, help=_duration_help(text))


def _duration_help(text: str) -> str:
    match = DURATION_RE.match(text.strip())
    if match is not None and float(match.group(1)) > 0:  # well formed: too long
        return f"a duration is at most {MAX_SECONDS / 86400:g} days"
    return "write a positive number and a unit: 500ms, 30s, 5m, 2h, 1d, 2w"


__all__ = ["Validated", "describe", "document_validator", "validate"]
