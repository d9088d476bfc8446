"""Task functions the golden cases named tasks_*.yaml are checked against (via --tasks)."""

from __future__ import annotations

from typing import TypedDict

from tether import task


@task("ledger.lookup_account")
def lookup_account(account: str) -> dict[str, str]:
    return {"account": account}


@task("ledger.charge")
def charge(amount: float, account: str, currency: str = "EUR") -> dict[str, object]:
    return {"amount": amount}


@task("ledger.untyped")
def untyped(account, *extra: str) -> str:  # type: ignore[no-untyped-def]
    return str(account)


class Build(TypedDict):
    """A build's result: what `check --tasks` knows of `nodes.<id>.output`."""

    artifact: str
    size: int


@task("ci.build")
def build(target: str) -> Build:
    return {"artifact": target, "size": 1}


@task("ci.matrix")
def matrix() -> list[Build]:
    return []
