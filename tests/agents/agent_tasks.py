"""Tools of the agent-run tests: each call is appended to the file $AGENT_LOG, so a test can
count calls across processes (a killed one included)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import tether


def _log(line: str) -> None:
    with open(os.environ["AGENT_LOG"], "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


@tether.task("shop.lookup")
def lookup(invoice: str) -> dict[str, object]:
    """Look an invoice up.

    Args:
        invoice: The invoice number, as printed.
    """
    _log(f"lookup {invoice}")
    return {"invoice": invoice, "amount": 120, "currency": "EUR"}


@tether.task("shop.charge")
@tether.idempotent
def charge(invoice: str, amount: float) -> dict[str, object]:
    """Charge an invoice (at most once per run)."""
    _log(f"charge {invoice} {amount:g}")
    return {"charged": amount, "invoice": invoice}


@tether.task("shop.review")
def review(invoice: str) -> dict[str, object]:
    """Ask a manager to review an invoice (pauses the run)."""
    _log(f"review {invoice}")
    answer = tether.interrupt("manager_review", {"invoice": invoice, "why": "large amount"})
    return {"invoice": invoice, "approved": bool(answer.get("approved"))}


@tether.task("shop.block")
def block(invoice: str) -> str:
    """Blocks until the file $AGENT_RELEASE exists (the test kills the process meanwhile)."""
    _log(f"block {invoice}")
    release = Path(os.environ["AGENT_RELEASE"])
    Path(os.environ["AGENT_LOG"] + ".blocked").touch()
    while not release.exists():
        time.sleep(0.01)
    return f"{invoice} done"


@tether.task("shop.echo")
def echo(text: str) -> str:
    """Say ``text`` back."""
    _log("echo")
    return text
