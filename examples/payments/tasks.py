"""Tasks of the payments example: an invoice book and a bank, simulated.

The agent calls ``lookup_invoice`` and ``pay`` as tools; ``pay`` is ``@idempotent``, so a
payment re-run after a crash or a resume never moves the money twice. Side effects are
appended to the ledger file (``TETHER_EXAMPLE_LEDGER``, default ``.tether/ledger.jsonl``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Literal

from tether import idempotent, task

INVOICES = {
    "INV-7": {"supplier": "Acme Tools", "amount": 120.0, "currency": "EUR",
              "iban": "DE02120300000000202051", "status": "due"},
    "INV-8": {"supplier": "Globex", "amount": 4800.0, "currency": "EUR",
              "iban": "FR7630006000011234567890189", "status": "disputed"},
}


def _record(entry: dict[str, object]) -> None:
    path = Path(os.environ.get("TETHER_EXAMPLE_LEDGER", ".tether/ledger.jsonl"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(entry) + "\n")


@task("payments.lookup_invoice")
def lookup_invoice(invoice: str) -> dict[str, object]:
    """Look an invoice up: supplier, amount due, currency, bank account and status.

    Args:
        invoice: The invoice number, as printed on it (INV-7).
    """
    found = INVOICES.get(invoice)
    if found is None:
        return {"invoice": invoice, "error": "no such invoice"}
    return {"invoice": invoice, **found}


@task("payments.pay")
@idempotent
def pay(invoice: str, amount: float, iban: str,
        currency: Literal["EUR", "USD"] = "EUR") -> dict[str, object]:
    """Pay an invoice by bank transfer (a human approves every call first).

    Args:
        invoice: The invoice number.
        amount: The amount to transfer, exactly the amount due.
        iban: The supplier's bank account.
        currency: The currency of the amount.
    """
    transfer = f"TR-{invoice}-{amount:g}"
    _record({"kind": "payment", "invoice": invoice, "amount": amount, "iban": iban,
             "currency": currency, "transfer": transfer})
    return {"transfer": transfer, "status": "sent"}


@task("payments.receipt")
def receipt(invoice: str, paid: bool) -> str:
    """File a receipt for the run."""
    _record({"kind": "receipt", "invoice": invoice, "paid": paid})
    return f"receipt for {invoice}: {'paid' if paid else 'not paid'}"
