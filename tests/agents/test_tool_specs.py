"""Tool specs from annotated task functions, declared names, clashes, argument validation,
and the worker and handoff tools."""

from __future__ import annotations

import dataclasses
import enum
import sys
import typing
from collections.abc import Callable
from typing import Any, Literal, Optional

import jsonschema
import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict

from tether.agents import (
    NameClash,
    ToolArgumentsError,
    ToolKind,
    ToolSchemaError,
    declared_name,
    find_clashes,
    handoff_tool,
    tool_spec,
    worker_tool,
)


class Address(BaseModel):
    street: str
    city: str = "Paris"


class Limits(TypedDict):
    daily: int
    monthly: int


@dataclasses.dataclass
class Window:
    start: str
    end: str


class Currency(enum.Enum):
    EUR = "EUR"
    USD = "USD"


async def charge(account: str, amount: float, currency: Currency = Currency.EUR,
                 note: Optional[str] = None, address: Address | None = None,  # noqa: UP045
                 limits: Limits | None = None, window: Window | None = None,
                 mode: Literal["fast", "safe"] = "safe", tags: list[str] | None = None) -> str:
    """Charge an account
    for an amount.

    Charges are final; this paragraph is not part of the description.

    Args:
        account: The account id
            (as printed on the invoice).
        amount (float): How much to charge.
        mode: How to charge.

    Returns:
        The charge id.
    """
    return "ch_1"


def test_schema_from_type_hints_and_docstring() -> None:
    """Types, defaults, Optional, enums, Literal, nested models, TypedDict and dataclass
    parameters all get a JSON Schema; the docstring gives the descriptions."""
    spec = tool_spec(charge, "billing.charge")
    assert spec.name_as_written == "billing.charge"
    assert spec.declared_name == "billing_charge"
    assert spec.kind is ToolKind.TASK
    assert spec.description == "Charge an account for an amount."
    params = spec.parameters
    assert list(params) == ["type", "properties", "required", "additionalProperties", "$defs"]
    assert params["required"] == ["account", "amount"]
    assert params["additionalProperties"] is False
    props = params["properties"]
    assert props["account"] == {"description": "The account id (as printed on the invoice).",
                                "type": "string"}
    assert props["amount"] == {"description": "How much to charge.", "type": "number"}
    assert props["currency"] == {"$ref": "#/$defs/Currency", "default": "EUR"}
    assert props["note"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    assert props["mode"] == {"default": "safe", "description": "How to charge.",
                             "enum": ["fast", "safe"], "type": "string"}
    assert props["tags"]["anyOf"][0] == {"items": {"type": "string"}, "type": "array"}
    defs = params["$defs"]
    assert defs["Address"]["required"] == ["street"]
    assert defs["Limits"]["properties"] == {"daily": {"type": "integer"},
                                            "monthly": {"type": "integer"}}
    assert defs["Window"]["required"] == ["start", "end"]
    assert "title" not in str(params), "generated titles are removed"
    jsonschema.Draft202012Validator.check_schema(params)


def test_titles_are_removed_from_schemas_only() -> None:
    """A parameter named ``title`` and a default holding a ``title`` key are kept."""

    def create(title: str, meta: dict[str, str] | None = None) -> None:
        """Create a page."""

    spec = tool_spec(create)
    assert list(spec.parameters["properties"]) == ["title", "meta"]
    assert spec.parameters["required"] == ["title"]


def test_bind_converts_to_the_annotated_types() -> None:
    """Validated arguments become the Python values the function expects; defaults the model
    left out are the function's own."""
    spec = tool_spec(charge, "billing.charge")
    bound = spec.bind({"account": "A1", "amount": 3, "currency": "USD",
                       "address": {"street": "Main"}, "window": {"start": "a", "end": "b"}})
    assert bound == {"account": "A1", "amount": 3.0, "currency": Currency.USD,
                     "address": Address(street="Main"), "window": Window("a", "b")}
    assert spec.check_arguments({"account": "A1", "amount": 1}) is None


def test_invalid_arguments_give_a_text_for_the_model() -> None:
    """Missing, mistyped and unknown arguments are listed, by parameter path."""
    spec = tool_spec(charge, "billing.charge")
    text = spec.check_arguments({"amount": "lots", "address": {}, "colour": "red"})
    assert text == (
        "Invalid arguments for tool 'billing_charge': account: Field required; "
        "amount: Input should be a valid number, unable to parse string as a number; "
        "address.street: Field required; colour: Extra inputs are not permitted")
    with pytest.raises(ToolArgumentsError) as caught:
        spec.bind(["not", "an", "object"])
    assert caught.value.text == ("Invalid arguments for tool 'billing_charge': the arguments "
                                 "must be a JSON object")


def test_sync_functions_and_parameters_named_like_model_attributes() -> None:
    """Any parameter name works (even ``json`` or ``model_config``), sync or async."""

    def lookup(json: str, model_config: int = 0, schema: bool = False) -> None:
        """Look something up."""

    spec = tool_spec(lookup)
    assert spec.declared_name == "lookup"
    assert list(spec.parameters["properties"]) == ["json", "model_config", "schema"]
    assert spec.bind({"json": "x", "schema": True}) == {"json": "x", "schema": True}


class OldStyleOptions(typing.TypedDict):
    fast: bool


class Opaque:
    """A class pydantic knows nothing about."""


def _opaque(account: str, thing: Opaque) -> None: ...
def _callback(on_done: Callable[[int], None]) -> None: ...
def _star_args(*accounts: str) -> None: ...
def _star_kwargs(account: str, **options: str) -> None: ...
def _positional(account: str, /) -> None: ...
def _unannotated(account) -> None: ...  # type: ignore[no-untyped-def]
def _unresolvable(account: NoSuchType) -> None: ...  # type: ignore[name-defined]  # noqa: F821


@pytest.mark.parametrize(("fn", "message"), [
    (_opaque, "parameter 'thing' of tool 'billing.x': its type Opaque has no JSON Schema; "
              "use JSON types (str, int, float, bool, list, dict), Optional, Literal, enums, "
              "pydantic models, dataclasses or TypedDicts"),
    (_callback, "parameter 'on_done' of tool 'billing.x': its type "
                "collections.abc.Callable[[int], None] has no JSON Schema; use JSON types"),
    (_star_args, "parameter 'accounts' of tool 'billing.x': *accounts cannot be described to "
                 "a model: declare each parameter by name"),
    (_star_kwargs, "parameter 'options' of tool 'billing.x': **options cannot be described to "
                   "a model: declare each parameter by name"),
    (_positional, "parameter 'account' of tool 'billing.x': positional-only parameters cannot "
                  "be passed by name"),
    (_unannotated, "parameter 'account' of tool 'billing.x': has no type annotation: a model "
                   "needs to know its type"),
    (_unresolvable, "tool 'billing.x': its type hints cannot be resolved: name 'NoSuchType' "
                    "is not defined"),
])
def test_parameters_without_a_json_schema_are_typed_errors(fn: Callable[..., Any],
                                                            message: str) -> None:
    """The error names the tool and the parameter (the compiler reports it at the tool)."""
    with pytest.raises(ToolSchemaError) as caught:
        tool_spec(fn, "billing.x")
    assert str(caught.value).startswith(message)
    assert caught.value.tool == "billing.x"


def test_typing_typeddict_on_old_pythons_says_what_to_use() -> None:
    """pydantic's own advice survives when it is the useful part of the message."""
    if sys.version_info >= (3, 12):
        pytest.skip("typing.TypedDict is supported from Python 3.12")

    def use(options: OldStyleOptions) -> None: ...

    with pytest.raises(ToolSchemaError, match=r"typing_extensions\.TypedDict"):
        tool_spec(use, "t")


def test_a_callable_object_is_a_tool_too() -> None:
    """An instance with ``__call__`` is described by its call signature."""

    class Lookup:
        def __call__(self, account: str) -> str:
            """Look an account up."""
            return account

    spec = tool_spec(Lookup(), "lookup")
    assert spec.parameters["required"] == ["account"]


@pytest.mark.parametrize(("name", "declared"), [
    ("billing.lookup", "billing_lookup"),
    ("billing-lookup_2", "billing-lookup_2"),
    ("façade.règle/ü", "fa_ade_r_gle__"),
    ("a b\tc", "a_b_c"),
    ("x" * 70, "x" * 64),
])
def test_declared_names(name: str, declared: str) -> None:
    """Characters outside [A-Za-z0-9_-] become ``_``; names are cut to 64 characters."""
    assert declared_name(name) == declared


def test_an_empty_name_is_refused() -> None:
    with pytest.raises(ToolSchemaError, match="a tool needs a name"):
        declared_name("")


def test_clashes_group_names_that_share_a_declared_name() -> None:
    """Only distinct names clash; a name listed twice is not a clash with itself."""
    long_a, long_b = "p" * 64 + ".a", "p" * 64 + ".b"
    clashes = find_clashes(["billing.lookup", "refund", "billing_lookup", "billing.lookup",
                            "billing/lookup", long_a, long_b])
    assert clashes == (
        NameClash("billing_lookup", ("billing.lookup", "billing_lookup", "billing/lookup")),
        NameClash("p" * 64, (long_a, long_b)),
    )
    assert find_clashes(["a.b", "c"]) == ()


def test_worker_tool_takes_one_required_request() -> None:
    """A supervisor's worker agent is a tool with one string parameter, ``request``."""
    spec = worker_tool("invoice.reader")
    assert (spec.name_as_written, spec.declared_name, spec.kind, spec.target) == (
        "invoice.reader", "invoice_reader", ToolKind.WORKER, "invoice.reader")
    assert spec.parameters["required"] == ["request"]
    assert spec.parameters["properties"]["request"]["type"] == "string"
    assert spec.bind({"request": "read INV-7"}) == {"request": "read INV-7"}
    assert spec.check_arguments({}) == (
        "Invalid arguments for tool 'invoice_reader': request: Field required")


def test_handoff_tool_is_transfer_to_node_with_an_optional_reason() -> None:
    """A handoff target is offered as ``transfer_to_<node>``; ``reason`` may be left out."""
    spec = handoff_tool("disputes", description="Hand over disputed invoices.")
    assert (spec.name_as_written, spec.declared_name, spec.kind, spec.target) == (
        "transfer_to_disputes", "transfer_to_disputes", ToolKind.HANDOFF, "disputes")
    assert spec.description == "Hand over disputed invoices."
    assert "required" not in spec.parameters
    assert spec.bind({}) == {}
    assert spec.bind({"reason": "disputed"}) == {"reason": "disputed"}
