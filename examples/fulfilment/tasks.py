"""Tasks of the fulfilment example: a simulated shop back office."""

from __future__ import annotations

from typing import Any

from tether import task


@task("shop.load_order")
def load_order(order_id: str, total: float) -> dict[str, Any]:
    """The order's customer and items."""
    return {"id": order_id, "customer": f"cust-{order_id[-2:]}", "total": total,
            "items": [{"sku": "BOOK-1", "qty": 2}, {"sku": "PEN-3", "qty": 1}]}


@task("shop.fraud_score")
def fraud_score(order: dict[str, Any]) -> dict[str, float]:
    """A fraud score between 0 and 1 (higher is worse)."""
    return {"score": 0.9 if order["total"] > 5000 else 0.1}


@task("shop.credit_check")
def credit_check(customer: str, total: float) -> dict[str, object]:
    """Whether the customer's credit covers the order."""
    return {"customer": customer, "approved": total < 3000}


@task("shop.reserve_stock")
def reserve_stock(items: list[dict[str, Any]]) -> dict[str, object]:
    """Reserve the items in the warehouse (a side effect: marked idempotent)."""
    return {"reserved": sum(int(i["qty"]) for i in items)}


@task("shop.decide")
def decide(fraud: float, credit: bool | None, reserved: bool) -> dict[str, str]:
    """Ship, review or reject."""
    if fraud > 0.5 or credit is False:
        return {"decision": "reject"}
    if not reserved:
        return {"decision": "review"}
    return {"decision": "ship"}
