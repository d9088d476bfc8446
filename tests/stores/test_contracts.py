"""The store contract split by job (``tether.stores.contracts``): every backend is each
protocol, every public ``Checkpointer`` method is placed in exactly one protocol, and every
conformance file says which protocols it checks."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path
from typing import Any

import pytest

from tether.stores import contracts
from tether.stores.base import Checkpointer
from tether.stores.contracts import (
    PROTOCOLS,
    EventStore,
    IdempotencyStore,
    IdLookup,
    QueueStore,
    RunStore,
    ScheduleStore,
)

HERE = Path(__file__).parent


def _members(protocol: type) -> set[str]:
    return {n for n, v in vars(protocol).items() if not n.startswith("_") and callable(v)}


def _public_methods(cls: type) -> set[str]:
    return {n for n, v in inspect.getmembers(cls) if not n.startswith("_") and callable(v)}


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_every_backend_is_an_instance_of_every_protocol(store: Checkpointer,
                                                        protocol: type) -> None:
    assert isinstance(store, protocol), f"{type(store).__name__} is not a {protocol.__name__}"


def test_every_public_checkpointer_method_is_in_exactly_one_protocol() -> None:
    """A method added to Checkpointer fails here until it is placed in a protocol."""
    placed: dict[str, list[str]] = {}
    for protocol in PROTOCOLS:
        for name in _members(protocol):
            placed.setdefault(name, []).append(protocol.__name__)
    methods = _public_methods(Checkpointer)
    unplaced = sorted(methods - placed.keys())
    assert not unplaced, f"Checkpointer methods in no protocol of contracts.py: {unplaced}"
    twice = {name: where for name, where in placed.items() if len(where) > 1}
    assert not twice, f"methods in more than one protocol: {twice}"
    stray = sorted(placed.keys() - methods)
    assert not stray, f"protocol methods Checkpointer does not have: {stray}"


def test_a_store_missing_one_method_is_not_that_protocol() -> None:
    """The runtime check has teeth: drop one method and the object stops conforming."""

    class Half:
        def get_idempotent(self, execution_id: str, key: str) -> str | None:
            return None

    assert not isinstance(Half(), IdempotencyStore)
    Half.put_idempotent = lambda self, *a, **k: "x"  # type: ignore[attr-defined]
    assert isinstance(Half(), IdempotencyStore)
    assert not isinstance(Half(), EventStore)


def test_the_protocols_tuple_names_every_protocol_of_the_module() -> None:
    declared = {RunStore, QueueStore, ScheduleStore, IdempotencyStore, EventStore, IdLookup}
    assert set(PROTOCOLS) == declared
    assert set(contracts.__all__) == {p.__name__ for p in declared}


def _marked_protocols(path: Path) -> list[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                and node.targets[0].id == "pytestmark" and isinstance(node.value, ast.Call)):
            return [arg.value for arg in node.value.args if isinstance(arg, ast.Constant)]
    return []


@pytest.mark.parametrize("path", sorted(HERE.glob("test_conformance*.py")), ids=lambda p: p.name)
def test_every_conformance_file_names_the_protocols_it_checks(path: Path) -> None:
    names = _marked_protocols(path)
    known = {p.__name__ for p in PROTOCOLS}
    assert names, f"{path.name}: no pytestmark = pytest.mark.protocol(...)"
    assert set(names) <= known, f"{path.name}: unknown protocols {set(names) - known}"
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    for name in names:
        assert name in docstring, f"{path.name}: its docstring does not name {name}"


def test_every_protocol_is_checked_by_some_conformance_file() -> None:
    covered = {n for p in HERE.glob("test_conformance*.py") for n in _marked_protocols(p)}
    assert covered == {p.__name__ for p in PROTOCOLS}


def test_sql_queue_reaches_into_no_other_objects_private_members() -> None:
    """``sql_queue.py`` uses the SQL store's public plumbing only (``sql_cursor``,
    ``sql_execute``, ``wake_workers``, ``run_from_row``), never ``store._something``."""
    import tether.stores.sql_queue as module

    tree = ast.parse(Path(module.__file__).read_text(encoding="utf-8"))
    reached = sorted(
        f"{node.lineno}: {ast.unparse(node)}" for node in ast.walk(tree)
        if isinstance(node, ast.Attribute) and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id == "self"))
    assert not reached, f"private members of other objects: {reached}"


def test_a_workers_switches_are_arguments_of_use_for_worker_and_stay_on_that_store(
        store: Checkpointer) -> None:
    """``use_for_worker`` turns a store's worker switches on for that store only: another
    store of the same class (``tether run``'s) keeps plain writes and no group."""
    from tether.stores.memory import InMemoryCheckpointer
    from tether.stores.write_group import WriteGroup

    assert (store.reads_cancel_on_write, store.write_group) == (False, None)
    group: WriteGroup[Any, Any] = WriteGroup()
    store.use_for_worker(write_group=group)
    assert store.reads_cancel_on_write is True and store.write_group is group
    other = type(store).__new__(type(store)) if not isinstance(
        store, InMemoryCheckpointer) else InMemoryCheckpointer()
    assert (other.reads_cancel_on_write, other.write_group) == (False, None)
    store.use_for_worker()
    assert store.reads_cancel_on_write is True and store.write_group is None
