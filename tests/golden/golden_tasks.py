"""Task functions the golden cases named tasks_*.yaml are checked against (via --tasks)."""

from __future__ import annotations

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
