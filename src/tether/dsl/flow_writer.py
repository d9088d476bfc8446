"""Write a :class:`~tether.dsl.document.WorkflowDoc` as canonical ``.flow`` text.

The output reads back (:func:`tether.dsl.flow_reader.read_flow`) to an equal document:
every key the document sets is written, explicit empties (``()``, ``after []``, ``= null``)
included. Comments of the original file are not kept; the layout is canonical: the header,
the description, the inputs, then each node with its head on one line and one clause per
indented line, then the output.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, assert_never

from tether.dsl.document import FORMAT_VERSION, WorkflowDoc, dump_document
from tether.dsl.flow_syntax import AGENT_LISTS, AGENT_PARTS, terminal_pattern
from tether.kinds import KIND_NAMES, NodeKind

INDENT = "    "
WIDTH = 100
_KEYWORDS = ("true", "false", "null")
# Characters str.splitlines() breaks on that JSON leaves unescaped: escaping them keeps the
# line numbers of every tool that splits lines the same.
_LINE_BREAKS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


@functools.cache
def _terminal(name: str) -> re.Pattern[str]:
    """The grammar's own pattern of a terminal, so a bare token is written only if it reads back."""
    return re.compile(terminal_pattern(name))


def _bare(name: str, text: str) -> bool:
    return _terminal(name).fullmatch(text) is not None and text not in _KEYWORDS


def quoted(text: str) -> str:
    """A JSON string literal."""
    literal = json.dumps(text, ensure_ascii=False)
    for char, escape in _LINE_BREAKS.items():
        literal = literal.replace(char, escape)
    return literal


def string(text: str) -> str:
    """A string value: a bare ``{{ template }}`` when that reads back the same, else JSON."""
    return text if _bare("TEMPLATE", text) and text.isprintable() else quoted(text)


def word(text: str) -> str:
    """A name (a reason, a trigger rule, a strategy, a case) bare when it reads back as one:
    these take ``NAME | STRING``, so ``A-0`` is quoted."""
    return text if _bare("NAME", text) else quoted(text)


def ident(text: str) -> str:
    """A node id or a workflow's name (``ID | STRING``: ``build-linux`` stays bare)."""
    return text if _bare("NAME", text) or _bare("ID", text) else quoted(text)


def scalar(value: Any) -> str:
    """A JSON scalar as .flow text."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return json.dumps(value)
    return string(str(value))


def value(data: Any, indent: str = "", used: int = 0) -> str:
    """Any JSON value; a list or mapping too wide for one line gets one item per line.

    ``indent`` is the indentation of the line the value starts on, ``used`` the columns
    already taken on it.
    """
    if isinstance(data, list):
        items = [value(item, indent + INDENT, len(indent + INDENT)) for item in data]
        return _container("[", "]", items, indent, used)
    if isinstance(data, dict):
        return _container("{", "}", _pairs(data, indent + INDENT), indent, used)
    return scalar(data)


def key(text: str) -> str:
    """A mapping key, argument or output name: bare only as a plain name (``a-b`` is quoted:
    keys are ``NAME | STRING`` in the grammar)."""
    return text if _bare("NAME", text) else quoted(text)


def _pairs(data: dict[str, Any], indent: str) -> list[str]:
    """``key: value`` items, each laid out as if it started its own line at ``indent``."""
    items = []
    for name, item in data.items():
        prefix = f"{key(name)}: "
        items.append(prefix + value(item, indent, len(indent) + len(prefix)))
    return items


def _container(open_: str, close: str, items: list[str], indent: str, used: int = 0) -> str:
    flat = open_ + ", ".join(items) + close
    if max(used, len(indent)) + len(flat) <= WIDTH and "\n" not in flat:
        return flat
    inner = indent + INDENT
    return open_ + "\n" + "".join(f"{inner}{item},\n" for item in items) + indent + close


def duration(text: str | None) -> str:
    """A duration bare (``2s``) when it reads back as one, else as a string."""
    if text is None:
        return "null"
    return text if _bare("DURATION", text) else quoted(text)


def _spec(name: str, spec: dict[str, Any], indent: str, used: int) -> str:
    """``NAME: TYPE [= VALUE] [enum VALUES] [description STRING]`` (inputs and form fields)."""
    text = f"{name}: {spec['type']}"
    if "default" in spec:
        text += " = " + value(spec["default"], indent, used + len(text) + 3)
    if "enum" in spec:
        text += " enum " + value(spec["enum"], indent, used + len(text) + 6)
    if "description" in spec:
        description = spec["description"]
        text += " description " + ("null" if description is None else quoted(description))
    return text


def _fields(form: dict[str, Any]) -> str:
    items = [_spec(name, spec, INDENT * 2, len(INDENT * 2)) for name, spec in form.items()]
    return _container("(", ")", items, INDENT, len(INDENT + "form "))


def _kind(node: dict[str, Any]) -> NodeKind:
    """The kind a node gives a value (a valid document gives exactly one)."""
    given = (kind for kind in NodeKind if node.get(kind.value) is not None)
    return next(given, NodeKind.APPROVAL)  # an approval's parts may all be clauses


def _head(node_id: str, node: dict[str, Any]) -> str:
    kind = _kind(node)
    match kind:
        case NodeKind.TASK:
            task = node["task"]
            head = f"task {node_id} = {task if _bare('TASK_NAME', task) else quoted(task)}"
        case NodeKind.WORKFLOW:
            head = f"workflow {node_id} = {quoted(node['workflow'])}"
        case NodeKind.APPROVAL | NodeKind.AGENT | NodeKind.SWITCH | NodeKind.NOOP:
            head = f"{kind.value} {node_id}"  # their parts are clauses
        case NodeKind.FAIL | NodeKind.SLEEP | NodeKind.SLEEP_UNTIL:
            word = kind.value
            head = f"{word} {node_id} = {value(node[word], '', len(node_id) + len(word) + 4)}"
        case _:
            assert_never(kind)
    args = node.get("with")
    return head if args is None else head + _container("(", ")", _pairs(args, INDENT), "",
                                                       len(head))


def _clause(keyword: str, data: Any) -> str:
    """``KEYWORD VALUE`` on a continuation line."""
    return f"{keyword} {value(data, INDENT, len(INDENT) + len(keyword) + 1)}"


def _approval_clauses(approval: dict[str, Any]) -> list[str]:
    lines = []
    if "reason" in approval:
        reason = approval["reason"]
        lines.append("reason " + ("null" if reason is None else word(reason)))
    if "context" in approval:
        lines.append(_clause("context", approval["context"]))
    if "form" in approval:
        form = approval["form"]
        lines.append("form " + ("null" if form is None else _fields(form)))
    for key in ("timeout", "on_timeout"):
        if key in approval:
            given = approval[key]
            # a template timeout is a string in `.flow` (the clause takes no bare template)
            lines.append(f"timeout {quoted(given)}" if key == "timeout" and
                         isinstance(given, str) and "{{" in given else _clause(key, given))
    return lines


def _names(keyword: str, names: list[str] | None, bare: str) -> str:
    """``KEYWORD a, b`` (``after``, ``tools``...); ``[]`` when empty, ``null`` when null."""
    if names is None:
        return f"{keyword} null"
    written = [name if _bare(bare, name) else quoted(name) for name in names]
    return f"{keyword} " + (", ".join(written) if written else "[]")


def _model(model: Any) -> str:
    if isinstance(model, str):
        return "model " + (model if _bare("MODEL_REF", model) else quoted(model))
    return _clause("model", model)


def _agent_clauses(agent: dict[str, Any]) -> list[str]:
    lines = []
    for key in AGENT_PARTS:
        if key not in agent:
            continue
        if key == "model":
            lines.append(_model(agent[key]))
        elif key in AGENT_LISTS:
            lines.append(_names(key, agent[key], "ID" if key == "handoffs" else "TASK_NAME"))
        else:
            lines.append(_clause(key, agent[key]))
    return lines


def _retry(retry: dict[str, Any] | None) -> str:
    if retry is None:
        return "retry null"
    text = "retry " + scalar(retry["max_attempts"])
    if "backoff" in retry:
        text += " backoff " + duration(retry["backoff"])
    if "strategy" in retry:
        strategy = retry["strategy"]
        text += " strategy " + ("null" if strategy is None else word(strategy))
    return text


def _switch_clauses(switch: dict[str, Any]) -> list[str]:
    lines = []
    if "on" in switch:
        lines.append(_clause("on", switch["on"]))
    for case, members in (switch.get("cases") or {}).items():
        lines.append(f"case {word(case)}: " + _ids(members))
    if "default" in switch:
        default = switch["default"]
        lines.append("default " + ("null" if default is None else _ids(default)))
    return lines


def _ids(ids: list[str]) -> str:
    return ", ".join(ident(i) for i in ids) if ids else "[]"


def _loop(loop: dict[str, Any] | None) -> str:
    if loop is None:
        return "loop null"
    text = (f"loop to {ident(loop['to'])} while {value(loop['while'], INDENT)}"
            f" max {scalar(loop['max_iterations'])}")
    if "on_exhausted" in loop:
        exhausted = loop["on_exhausted"]
        text += " on_exhausted " + ("null" if exhausted is None else word(exhausted))
    return text


def _secrets(names: list[str] | None) -> str:
    if names is None:
        return "secrets null"
    return "secrets " + (", ".join(word(name) for name in names) if names else "[]")


def _needs(needs: list[str] | None) -> str:
    return _names("after", needs, "ID")


def _clauses(node: dict[str, Any]) -> list[str]:
    """Every clause the node sets, in the canonical order."""
    lines = _approval_clauses(node["approval"]) if node.get("approval") is not None else []
    lines += _agent_clauses(node["agent"]) if node.get("agent") is not None else []
    if node.get("switch") is not None:
        lines += _switch_clauses(node["switch"])
    for key, text in (
        ("title", lambda v: "title " + ("null" if v is None else quoted(v))),
        ("renamed_from", lambda v: _names("renamed_from", [v] if isinstance(v, str) else v, "ID")),
        ("needs", lambda v: _needs(v)),
        ("when", lambda v: _clause("when", v)),
        ("trigger", lambda v: "trigger " + ("null" if v is None else word(v))),
        ("for_each", lambda v: _clause("for_each", v)),
        ("matrix", lambda v: _clause("matrix", v)),
        ("fail_fast", lambda v: "fail_fast " + scalar(v)),
        ("concurrency", lambda v: "concurrency " + scalar(v)),
        ("retry", _retry),
        ("timeout", lambda v: "timeout " + duration(v)),
        ("idempotent", lambda v: "idempotent" if v is True else "idempotent " + scalar(v)),
        ("until", lambda v: _clause("until", v)),
        ("loop", _loop),
    ):
        if key in node:
            lines.append(text(node[key]))
    lines += [f"{kind} null" for kind in KIND_NAMES if kind in node and node[kind] is None
              and kind != _kind(node)]
    if "with" in node and node["with"] is None:
        lines.append("with null")
    return lines


def _node(node_id: str, node: dict[str, Any]) -> str:
    lines = [_head(node_id, node)]
    lines += [INDENT + clause for clause in _clauses(node)]
    return "\n".join(lines)


def _output(output: Any) -> list[str]:
    if isinstance(output, dict) and output:
        lines = [f"output {key(k)} = " for k in output]
        return [line + value(v, "", len(line)) for line, v in zip(lines, output.values(),
                                                                   strict=True)]
    return ["output " + value(output, "", len("output "))]


def write_flow(doc: WorkflowDoc) -> str:
    """The canonical ``.flow`` text of ``doc`` (comments of the source are not kept).

    Args:
        doc: A validated workflow document.

    Returns:
        Text that :func:`~tether.dsl.flow_reader.read_flow` reads back to an equal document.
    """
    data = dump_document(doc)
    lines: list[str] = []
    if data["tether"] != FORMAT_VERSION:
        lines.append(f"tether {scalar(data['tether'])}")
    lines.append(f"workflow {ident(data['name'])}")
    if "description" in data:
        description = data["description"]
        lines.append("description " + ("null" if description is None else quoted(description)))
    inputs = data.get("inputs")
    if "inputs" in data and not inputs:
        lines.append("inputs " + value(inputs))  # `inputs {}` or `inputs null`
    lines += [f"input {_spec(name, spec, '', len('input '))}"
              for name, spec in (inputs or {}).items()]
    if "secrets" in data:
        lines.append(_secrets(data["secrets"]))
    if "schedule" in data:
        lines.append("schedule " + value(data["schedule"], "", len("schedule ")))
    if "on" in data:
        lines.append("on " + value(data["on"], "", len("on ")))
    if "concurrency" in data:
        lines.append("concurrency " + value(data["concurrency"], "", len("concurrency ")))
    blocks = ["\n".join(lines)]
    nodes = [_node(node_id, node) for node_id, node in data["nodes"].items()]
    blocks.append(("\n\n" if any("\n" in node for node in nodes) else "\n").join(nodes))
    if "output" in data:
        blocks.append("\n".join(_output(data["output"])))
    return "\n\n".join(blocks) + "\n"
