"""A document validated by pydantic-core alone (``tether check``) reads as the pydantic models
read it.

:mod:`tether.dsl.document_light` validates with the core schema generated from
:mod:`tether.dsl.document` and light classes in place of the models. Validated both ways,
every golden file and example, every one-character mutation of a set of files, and every
value of a document touching every model replaced by values of other types give the same
pydantic-core errors, the same diagnostics, and objects with the same classes' names,
fields set, ``model_dump()``, ``kind`` and ``has_default``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from pydantic_core import ValidationError

from tether.compiler import Compiler
from tether.dsl import document, document_light, document_schema
from tether.dsl.document_rules import InputDefault, NodeKindOf
from tether.dsl.document_schema_gen import TARGET, generate
from tether.dsl.loader import parse_text, syntax_of
from tether.dsl.source import RawDocument
from tether.dsl.validate import Validated, validate

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p for p in [*(ROOT / "tests" / "golden").rglob("*"), *(ROOT / "examples").rglob("*")]
               if p.is_file() and syntax_of(p) is not None)

# A document with every model of the format and most of their fields.
EVERY_MODEL = """\
tether: 1
name: every
description: every model once
inputs:
  amount: {type: number, default: 10, description: how much}
  tier: {type: string, enum: [gold, silver]}
secrets: [API_KEY]
schedule: {cron: "0 3 * * *", timezone: Europe/Paris, inputs: {amount: 1}, catchup: all}
on:
  manual: {users: [ann]}
  webhook: {verify: hmac, secret: HOOK_KEY, path: every, inputs: {amount: 2},
            headers: [x-id], header: X-Sig, timestamp_header: X-Time,
            delivery_header: X-Id, tolerance: 5m}
concurrency: {key: "{{ inputs.tier }}", limit: 2, on_conflict: queue}
nodes:
  fetch:
    task: fetch
    with: {amount: "{{ inputs.amount }}"}
    retry: {max_attempts: 3, backoff: 1s, strategy: fixed}
    timeout: 30s
    idempotent: true
    title: Fetch
    renamed_from: [get]
  poll:
    task: poll
    needs: fetch
    until: output.done
    retry: {max_attempts: 5}
    for_each: [1, 2]
    concurrency: 2
    fail_fast: false
  grid:
    task: fetch
    matrix: {os: [linux, mac], exclude: [{os: mac}]}
  review:
    approval:
      reason: check
      context: {amount: "{{ inputs.amount }}"}
      form: {approved: {type: boolean}, note: {type: string, default: none}}
      timeout: 1d
      on_timeout: {approved: false}
    needs: [fetch]
    when: inputs.amount > 5
    trigger: none_failed
  helper:
    agent:
      model: {provider: openai, name: gpt-4.1-mini, base_url: "http://x", api_key_env: K}
      instructions: help
      prompt: "{{ inputs.tier }}"
      tools: [fetch]
      max_turns: 3
      output: {type: object}
      handoffs: []
      approve_tools: [fetch]
      max_tool_calls: {per_turn: 2, per_run: 4}
  pick:
    switch: {on: inputs.tier, cases: {gold: [done]}, default: [stop]}
    needs: [review]
  done: {noop: true}
  sub: {workflow: sub.yaml, with: {amount: 1}, needs: [done]}
  stop: {fail: "no {{ inputs.tier }}"}
  nap: {sleep: 1m, needs: [done]}
  wake: {sleep_until: "{{ inputs.tier }}", needs: [nap]}
  again:
    task: fetch
    needs: [wake]
    loop: {to: wake, while: "false", max_iterations: 3, on_exhausted: continue}
output: {amount: "{{ inputs.amount }}"}
"""


def _read(text: str, file: str) -> RawDocument:
    syntax = syntax_of(file)
    assert syntax is not None
    return parse_text(text, file, syntax)


def _same_objects(real: Any, light: Any, where: str = "doc") -> None:
    """The two trees hold the same values, models where models are (by name), with the same
    fields set and the same properties."""
    if isinstance(real, document.BaseModel):
        assert isinstance(light, document_light.LightModel), where
        assert type(light).__name__ == type(real).__name__, where
        assert light.model_fields_set == real.model_fields_set, where
        assert list(light.__dict__) == list(real.__dict__), where
        if isinstance(real, NodeKindOf):
            assert isinstance(light, NodeKindOf) and light.kind == real.kind, where
        if isinstance(real, InputDefault):
            assert isinstance(light, InputDefault), where
            assert light.has_default == real.has_default, where
        for name, value in real.__dict__.items():
            _same_objects(value, light.__dict__[name], f"{where}.{name}")
    elif isinstance(real, dict):
        assert isinstance(light, dict) and list(light) == list(real), where
        for key, value in real.items():
            _same_objects(value, light[key], f"{where}[{key!r}]")
    elif isinstance(real, list):
        assert isinstance(light, list) and len(light) == len(real), where
        for i, value in enumerate(real):
            _same_objects(value, light[i], f"{where}[{i}]")
    else:
        assert type(light) is type(real) and light == real, where


def _same_validation(data: Any) -> None:
    """pydantic-core's errors, or the objects, are the same both ways."""
    validator = document_light.light_validator()
    assert validator is not None
    try:
        real: Any = document.WorkflowDoc.model_validate(data)
    except ValidationError as exc:
        with pytest.raises(ValidationError) as light_exc:
            validator.validate_python(data)
        assert light_exc.value.errors(include_url=False) == exc.errors(include_url=False)
        assert light_exc.value.title == exc.title
        return
    light = validator.validate_python(data)
    _same_objects(real, light)
    for options in ({}, {"by_alias": True, "exclude_unset": True}, {"exclude_none": True}):
        assert light.model_dump(**options) == real.model_dump(**options), options
    assert light == validator.validate_python(copy.deepcopy(data))
    assert light != real  # (a light object is not a model: nothing mixes them up)


def _validated_both_ways(text: str, file: str) -> tuple[Validated, Validated]:
    real_raw, light_raw = _read(text, file), _read(text, file)
    real, light = validate(real_raw), validate(light_raw, light=True)
    assert light_raw.diagnostics == real_raw.diagnostics
    assert (light.broken_nodes, light.broken_inputs, light.broken_reads) == (
        real.broken_nodes, real.broken_inputs, real.broken_reads)
    if real.doc is None:
        assert light.doc is None
    else:
        assert isinstance(light.doc, document_light.LightModel)
        _same_objects(real.doc, light.doc)
    return real, light


def test_the_generated_schema_is_up_to_date() -> None:
    """Regenerate with ``python -m tether.dsl.document_schema_gen`` when this fails."""
    assert TARGET.read_text(encoding="utf-8") == generate()


def test_the_schema_names_every_model_and_its_keys() -> None:
    models = {name for name in dir(document) if isinstance(getattr(document, name), type)
              and issubclass(getattr(document, name), document.BaseModel)
              and getattr(document, name) is not document.BaseModel
              and name != "_Model"}
    assert set(document_schema.FIELDS) == models
    for name in models:
        fields = getattr(document, name).model_fields
        assert document_schema.FIELDS[name] == tuple(f.alias or k for k, f in fields.items())


def test_there_are_files_to_compare() -> None:
    assert len(FILES) > 100


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(ROOT)))
def test_golden_and_example_files_validate_the_same(path: Path) -> None:
    text = path.read_text(encoding="utf-8", errors="replace")
    _validated_both_ways(text, path.name)
    data = _read(text, path.name).data
    if isinstance(data, dict):
        _same_validation(data)


def test_a_document_of_every_model_validates_the_same() -> None:
    real, light = _validated_both_ways(EVERY_MODEL, "every.yaml")
    assert real.doc is not None and light.doc is not None
    kinds = {node_id: node.kind for node_id, node in light.doc.nodes.items()}
    assert len(set(kinds.values())) == 9  # every kind of node


def _paths(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [path]
    if isinstance(value, dict):
        for key, sub in value.items():
            found += _paths(sub, (*path, key))
    elif isinstance(value, list):
        for i, sub in enumerate(value):
            found += _paths(sub, (*path, i))
    return found


def _replaced(data: Any, path: tuple[Any, ...], value: Any) -> Any:
    if not path:
        return value
    out = copy.copy(data)
    out[path[0]] = _replaced(data[path[0]], path[1:], value)
    return out


OTHER_VALUES = (None, True, 0, -1, 2.5, "x", "{{ inputs.amount }}", [], ["x"], {}, {"x": 1})


def test_every_value_replaced_validates_the_same() -> None:
    """Each value of a document touching every model, replaced by values of other types; each
    mapping with a key removed and an unknown key added."""
    data = _read(EVERY_MODEL, "every.yaml").data
    document.WorkflowDoc.model_validate(data)  # (valid as it is)
    count = 0
    for path in _paths(data):
        for value in OTHER_VALUES:
            _same_validation(_replaced(data, path, value))
            count += 1
        parent: Any = data
        for key in path:
            parent = parent[key]
        if isinstance(parent, dict):
            for key in parent:
                _same_validation(_replaced(data, path, {k: v for k, v in parent.items()
                                                        if k != key}))
            _same_validation(_replaced(data, path, {**parent, "unknown": 1}))
            count += len(parent) + 1
    assert count > 1500


MUTATED = ("examples/refund/refund.yaml", "examples/refund/refund.flow",
           "tests/golden/cases/agent_errors.yaml", "tests/golden/cases/loop_bound.yaml")


@pytest.mark.parametrize("name", MUTATED)
def test_every_one_character_mutation_validates_the_same(name: str) -> None:
    """Each character deleted, doubled, or replaced by one of a few that change a YAML or
    .flow document's shape or a value's type."""
    text = (ROOT / name).read_text(encoding="utf-8")
    file = Path(name).name
    for i in range(len(text)):
        variants = [text[:i] + text[i + 1:], text[:i] + text[i] + text[i:]]
        variants += [text[:i] + c + text[i + 1:] for c in " 1x:-" if c != text[i]]
        for variant in variants:
            _validated_both_ways(variant, file)


def test_check_reads_light_documents_and_reports_the_same(tmp_path: Path) -> None:
    """``Compiler.check_file`` validates light; the compiler reports from light documents
    what it reports from the models."""
    path = tmp_path / "every.yaml"
    path.write_text(EVERY_MODEL, encoding="utf-8")
    light = Compiler().check_file(path)
    workflow, diagnostics = _workflow_with_models(path)
    real = diagnostics + Compiler().compile_workflow(workflow, build=False)[1]
    assert light == real and light  # (the document has warnings to compare)


def _workflow_with_models(path: Path) -> Any:
    from tether.dsl.loader import read_workflow

    workflow, diagnostics = read_workflow(path)
    assert workflow is not None and isinstance(workflow.doc, document.WorkflowDoc)
    return workflow, diagnostics


def test_another_pydantic_core_falls_back_to_the_models(monkeypatch: pytest.MonkeyPatch) -> None:
    """The schema was generated for one pydantic-core; with another, the light route
    validates with the models, and reports the same."""
    raw = _read(EVERY_MODEL, "every.yaml")
    assert isinstance(validate(raw, light=True).doc, document_light.LightModel)
    monkeypatch.setattr(document_schema, "PYDANTIC_CORE_VERSION", "0.0.0")
    document_light.light_validator.cache_clear()
    try:
        assert document_light.light_validator() is None
        raw = _read(EVERY_MODEL.replace("max_turns: 3", "max_turns: 0"), "every.yaml")
        fallen = validate(raw, light=True)
        assert isinstance(fallen.doc, document.WorkflowDoc)
        assert [d.code for d in raw.diagnostics] == ["E203"]
    finally:
        document_light.light_validator.cache_clear()


def test_a_light_document_is_frozen() -> None:
    raw = _read(EVERY_MODEL, "every.yaml")
    doc = validate(raw, light=True).doc
    assert doc is not None
    with pytest.raises(AttributeError, match="frozen"):
        doc.name = "other"  # type: ignore[misc]
    assert repr(doc.nodes["done"]).startswith("NodeSpec(task=None")


def _models_at(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[tuple[Any, ...], str]]:
    """(the path as a document spells it, the model's name) of every model in ``value``."""
    if isinstance(value, document.BaseModel):
        found = [(path, type(value).__name__)]
        for name, sub in value.__dict__.items():
            key = document_schema.ALIASES.get(name, name)
            found += _models_at(sub, (*path, key))
        return found
    if isinstance(value, dict):
        return [f for key, sub in value.items() for f in _models_at(sub, (*path, key))]
    return []


def test_unknown_keys_are_helped_with_the_keys_of_the_right_model() -> None:
    """``validate``'s "known keys" help names the model at a path without the models: each
    model of a document touching every model is found where it is."""
    from tether.dsl.validate import _model_at

    doc = document.WorkflowDoc.model_validate(_read(EVERY_MODEL, "every.yaml").data)
    found = _models_at(doc)
    assert {name for _, name in found} == set(document_schema.FIELDS)
    for path, name in found:
        assert _model_at(path) == name, path
