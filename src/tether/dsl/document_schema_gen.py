"""Write :mod:`tether.dsl.document_schema`: the core schema of the document models as a literal.

Run ``python -m tether.dsl.document_schema_gen`` (or ``make document-schema``) after changing
:mod:`tether.dsl.document` or upgrading pydantic; tests/dsl/test_document_light.py fails while
the file is stale. The schema is pydantic's own (``WorkflowDoc.__pydantic_core_schema__``)
with what only pydantic reads left out (``metadata``: JSON Schema hooks, ``ref``: ids that
change each run), each model's class replaced by the class of the same name in
:mod:`tether.dsl.document_light`, and each validator function by its name in
:mod:`tether.dsl.document_rules`. Each model's schema is written once, as a variable named
after it, before the schemas that hold it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

TARGET = Path(__file__).with_name("document_schema.py")
WIDTH = 99


class Name:
    """A name written bare in the generated source."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Name) and other.name == self.name

    def __hash__(self) -> int:
        return hash(self.name)


def emit(value: Any, indent: int, used: int = 0) -> str:
    """``value`` as Python source starting at column ``used`` of a line indented by
    ``indent``: on that line when it fits, else one key (or item) a line."""
    flat = repr(value)
    if max(used, indent) + len(flat) <= WIDTH or not isinstance(value, dict | list | tuple):
        return flat
    pad = " " * (indent + 4)
    if isinstance(value, dict):
        items = [f"{pad}{k!r}: {emit(v, indent + 4, indent + len(repr(k)) + 6)}"
                 for k, v in value.items()]
    else:
        items = [pad + emit(v, indent + 4) for v in value]
    brackets = {dict: "{}", list: "[]", tuple: "()"}[type(value)]
    return brackets[0] + "\n" + ",\n".join(items) + ",\n" + " " * indent + brackets[1]


def _strip(value: Any, functions: set[str]) -> Any:
    """The schema without pydantic's own keys, classes and functions as names."""
    if isinstance(value, list):
        return [_strip(v, functions) for v in value]
    if not isinstance(value, dict):
        if callable(value):
            if getattr(value, "__module__", "") != "tether.dsl.document_rules":
                raise SystemExit(f"the schema calls {value!r}, not a function of "
                                 "tether.dsl.document_rules: the light validator cannot")
            functions.add(value.__name__)
            return Name(value.__name__)
        return value
    return {k: Name(v.__name__) if k == "cls" else _strip(v, functions)
            for k, v in value.items() if k not in ("metadata", "ref")}


def _describe(schema: Any) -> str:
    """A name for a shared schema, from its shape: ``field_optional_str``."""
    if isinstance(schema, Name):
        return schema.name.lower()
    kind = str(schema.get("type"))
    inner = schema.get("schema")
    if kind == "model":
        return str(schema["cls"].name)
    if kind == "default" and isinstance(inner, dict) and inner.get("type") == "nullable":
        return "optional_" + _describe(inner["schema"])
    if kind in ("model-field", "default", "nullable"):
        return {"model-field": "field_", "default": "defaulted_",
                "nullable": "nullable_"}[kind] + _describe(inner)
    if kind in ("list", "dict"):
        return f"{kind}_of_" + _describe(schema["items_schema" if kind == "list"
                                                else "values_schema"])
    if kind == "no-info":
        return _describe(schema["function"])
    if kind == "function-before":
        return _describe(schema["function"]) + "_then_" + _describe(inner)
    if kind == "literal":
        return "literal_" + "_".join(str(v) for v in schema["expected"][:2])
    if kind == "union":
        return "_or_".join(_describe(choice) for choice in schema["choices"])
    return kind.replace("-", "_")


def count(value: Any, counts: dict[str, int]) -> None:
    """How many times each dict stands in ``value`` (a model's, counted inside once)."""
    if isinstance(value, dict):
        text = repr(value)
        counts[text] = counts.get(text, 0) + 1
        if value.get("type") == "model" and counts[text] > 1:
            return
        for sub in value.values():
            count(sub, counts)
    elif isinstance(value, list):
        for sub in value:
            count(sub, counts)


def hoist(value: Any, counts: dict[str, int], defined: dict[str, tuple[str, Any]],
           key: str = "") -> Any:
    """``value`` with each model's schema, and each schema that stands in several places
    (and is more than a word), replaced by a name; ``defined`` gets the definitions (by the
    schema's text), each after those it uses."""
    if isinstance(value, list):
        return [hoist(v, counts, defined) for v in value]
    if not isinstance(value, dict):
        return value
    text = repr(value)
    out = {k: hoist(v, counts, defined, k) for k, v in value.items()}
    is_model = value.get("type") == "model"
    is_schema = key not in ("fields", "config") and isinstance(value.get("type"), str)
    if not is_model and (not is_schema or counts[text] < 2 or len(text) < 40):
        return out
    if text not in defined:
        name, taken, suffix = "_" + _describe(value), {n for n, _ in defined.values()}, 2
        while name in taken:
            if is_model:
                raise SystemExit(f"two different schemas for model {name[1:]}")
            name, suffix = f"_{_describe(value)}_{suffix}", suffix + 1
        defined[text] = (name, out)
    return Name(defined[text][0])


def generate() -> str:
    """The source of :mod:`tether.dsl.document_schema`."""

    from tether.dsl import document

    functions: set[str] = set()
    root = _strip(document.WorkflowDoc.__pydantic_core_schema__, functions)
    counts: dict[str, int] = {}
    count(root, counts)
    defined: dict[str, tuple[str, Any]] = {}
    hoist(root, counts, defined)
    models = [name[1:] for name, schema in defined.values() if schema.get("type") == "model"]
    fields = {name: tuple(f.alias or key for key, f in getattr(document, name).model_fields
                          .items()) for name in models}
    aliases = {key: f.alias for name in models
               for key, f in getattr(document, name).model_fields.items() if f.alias}
    lines = [
        '"""The core schema of the workflow document (generated: do not edit).',
        "",
        "Made by ``python -m tether.dsl.document_schema_gen`` (``make document-schema``) from",
        "tether.dsl.document; read by tether.dsl.document_light.",
        '"""',
        "",
        "from __future__ import annotations",
        "",
        "from typing import Any",
        "",
        "from tether.dsl.document_light import (",
        *(f"    {name}," for name in sorted(models)),
        ")",
        "from tether.dsl.document_rules import " + ", ".join(sorted(functions)),
        "",
        *pinned_definitions(defined),
    ]
    lines += [
        "SCHEMA = _WorkflowDoc",
        f"CONFIG: dict[str, Any] = {emit(root['config'], 0, 26)}",
        "",
        "FIELDS: dict[str, tuple[str, ...]] = " + emit(fields, 0, 38),
        '"""The keys of each model, as a document spells them."""',
        "ALIASES: dict[str, str] = " + emit(aliases, 0, 26),
        '"""The fields a document spells otherwise (``while_`` is ``while``)."""',
        "",
    ]
    return "\n".join(lines)


def pinned_definitions(defined: dict[str, tuple[str, Any]]) -> list[str]:
    """A generated schema module's lines after its imports: the pydantic versions it was
    made with (read back as its pin), then each hoisted definition as a constant."""
    import pydantic
    import pydantic_core

    lines = [f"PYDANTIC_VERSION = {pydantic.VERSION!r}",
             f"PYDANTIC_CORE_VERSION = {pydantic_core.__version__!r}", ""]
    for name, schema in defined.values():
        head = f"{name}: dict[str, Any] = "
        lines += [head + emit(schema, 0, len(head)), ""]
    return lines


def write_generated(target: Path, text: str) -> int:
    """Write a generated module ``target`` unless it already holds ``text``; say which (the
    ``main`` of every ``*_gen`` module)."""
    if target.exists() and target.read_text(encoding="utf-8") == text:
        print(f"{target}: up to date")
        return 0
    target.write_text(text, encoding="utf-8")
    print(f"{target}: written")
    return 0


def main() -> int:
    return write_generated(TARGET, generate())


if __name__ == "__main__":
    sys.exit(main())
