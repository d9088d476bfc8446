"""Tasks of the order example (parent workflow and its shipping sub-workflow)."""

from __future__ import annotations

import hashlib

from tether import task


@task("orders.take")
def take(order_id: str) -> dict[str, object]:
    """Record the order; its parcel's weight in kg."""
    return {"order_id": order_id, "parcel": {"weight": 2.5, "items": 3}}


@task("orders.confirm")
def confirm(order_id: str, tracking: str) -> dict[str, object]:
    """Tell the customer."""
    return {"order_id": order_id, "tracking": tracking, "confirmed": True}


@task("shipping.quote")
def quote(weight: float, express: bool) -> dict[str, object]:
    """The cheapest carrier for the weight."""
    carrier = "swift" if express else ("parcelco" if weight < 5 else "freightly")
    return {"carrier": carrier, "price": round(4 + weight * 1.5, 2)}


@task("shipping.book")
def book(carrier: str, address: str) -> dict[str, str]:
    """Book a pickup with the carrier (a side effect: marked idempotent)."""
    digest = hashlib.sha256(f"{carrier}:{address}".encode()).hexdigest()[:10].upper()
    return {"carrier": carrier, "tracking": f"{carrier[:2].upper()}{digest}"}


@task("shipping.label")
def label(tracking: str) -> dict[str, str]:
    """The printable label."""
    return {"url": f"https://labels.example.com/{tracking}.pdf"}
