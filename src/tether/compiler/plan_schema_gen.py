"""Write :mod:`tether.compiler.plan_schema`: the core schema of the plan models as a literal.

Run ``python -m tether.compiler.plan_schema_gen`` (or ``make plan-schema``) after changing
:mod:`tether.compiler.plan` or upgrading pydantic; tests/compiler/test_plan_light.py fails
while the file is stale. As :mod:`tether.dsl.document_schema_gen` does for the workflow
document: pydantic's own schema (``Plan.__pydantic_core_schema__``) without ``metadata``, each
model's class replaced by the class of the same name in :mod:`tether.compiler.plan_light`,
each serialiser by its function in :mod:`tether.compiler.plan_rules`, each node's
before-validator by ``read_format_1(kind)``. The plan is recursive (a sub-workflow embeds a
plan), so its ``ref`` names stay, made stable: the model's name instead of an id.
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Any

from tether.dsl.document_schema_gen import (
    Name,
    count,
    emit,
    hoist,
    pinned_definitions,
    write_generated,
)

TARGET = Path(__file__).with_name("plan_schema.py")
_BUILTINS = {dict: "dict", list: "list", tuple: "tuple"}


def _ref(text: str) -> str:
    """``tether.compiler.plan.Plan:9425...`` -> ``Plan``."""
    return text.rpartition(":")[0].rpartition(".")[2]


def _function(value: Any, functions: set[str]) -> Name:
    owner = getattr(value, "__self__", None)
    if getattr(value, "__name__", "") == "_read_format_1" and isinstance(owner, type):
        kind = owner.model_fields["kind"].default  # type: ignore[attr-defined]
        functions.add("read_format_1")
        return Name(f"read_format_1(NodeKind.{kind.name})")
    if getattr(value, "__module__", "") != "tether.compiler.plan_rules":
        raise SystemExit(f"the schema calls {value!r}, not a function of "
                         "tether.compiler.plan_rules: the light reader cannot")
    functions.add(value.__name__)
    return Name(value.__name__)


def _strip(value: Any, functions: set[str]) -> Any:
    """The schema without pydantic's own keys; classes, enum members and functions as names."""
    if isinstance(value, list):
        return [_strip(v, functions) for v in value]
    if isinstance(value, enum.Enum):
        return Name(f"{type(value).__name__}.{value.name}")
    if isinstance(value, type) and value in _BUILTINS:
        return Name(_BUILTINS[value])
    if hasattr(type(value), "__pydantic_fields__"):  # a model as a default
        fields = {k: _strip(v, functions) for k, v in value.__dict__.items()}
        functions.add("made")
        return Name(f"made({type(value).__name__}, {fields!r}, "
                    f"{sorted(value.model_fields_set)!r})")
    if not isinstance(value, dict):
        return _function(value, functions) if callable(value) else value
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if key == "metadata":
            continue
        if key == "cls":
            out[key] = Name(item.__name__)
        elif key in ("ref", "schema_ref"):
            out[key] = _ref(item)
        else:
            out[_strip(key, functions)] = _strip(item, functions)
    return out


def generate() -> str:
    """The source of :mod:`tether.compiler.plan_schema`."""

    from tether.compiler import plan

    plan.Plan.model_rebuild()
    functions: set[str] = set()
    root = _strip(plan.Plan.__pydantic_core_schema__, functions)
    counts: dict[str, int] = {}
    count(root, counts)
    defined: dict[str, tuple[str, Any]] = {}
    top = hoist(root, counts, defined)
    models = sorted(name[1:] for name, schema in defined.values()
                    if schema.get("type") == "model")
    lines = [
        '"""The core schema of the plan (generated: do not edit).',
        "",
        "Made by ``python -m tether.compiler.plan_schema_gen`` (``make plan-schema``) from",
        "tether.compiler.plan; read by tether.compiler.plan_light.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
        "from tether.compiler.plan_light import (",
        *(f"    {name}," for name in models + sorted(functions & {"made"})),
        ")",
        "from tether.compiler.plan_rules import (",
        *(f"    {name}," for name in sorted(functions - {"made"})),
        ")",
        "from tether.kinds import NodeKind",
        "",
        *pinned_definitions(defined),
    ]
    head = "SCHEMA: dict[str, Any] = "
    lines += [head + emit(top, 0, len(head)) if not isinstance(top, Name)
              else f"SCHEMA = {top!r}", ""]
    return "\n".join(lines)


def main() -> int:
    return write_generated(TARGET, generate())


if __name__ == "__main__":
    sys.exit(main())
