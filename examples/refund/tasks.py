"""Tasks of the refund example: a simulated billing system and mailer.

Side effects are appended to ``ledger.jsonl`` next to the store (or to the path in
``TETHER_EXAMPLE_LEDGER``), so a demo and the tests can see that a refund happened once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from tether import idempotent, task

ACCOUNTS = {
    "ACC-42": {"holder": "Ada Lovelace", "email": "ada@example.com", "balance": 1200.0},
    "ACC-7": {"holder": "Alan Turing", "email": "alan@example.com", "balance": 80.0},
}


def _ledger() -> Path:
    return Path(os.environ.get("TETHER_EXAMPLE_LEDGER", ".tether/ledger.jsonl"))


def _record(entry: dict[str, object]) -> None:
    path = _ledger()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


@task("billing.lookup_account")
def lookup_account(account: str) -> dict[str, object]:
    """The account's holder, e-mail and balance."""
    if account not in ACCOUNTS:
        raise LookupError(f"no account {account}")
    return {"account": account, **ACCOUNTS[account]}


@task("billing.refund")
@idempotent
def refund(amount: float, account: str, memo: str = "") -> dict[str, object]:
    """Move money back to the customer: the side effect that must happen once."""
    refund_id = f"R-{account}-{amount:g}"
    _record({"kind": "refund", "id": refund_id, "amount": amount, "memo": memo})
    return {"id": refund_id, "amount": amount}


@task("notify.email")
def email(to: str, subject: str) -> dict[str, str]:
    """Send (here: record) an e-mail."""
    _record({"kind": "email", "to": to, "subject": subject})
    return {"to": to, "status": "sent"}
