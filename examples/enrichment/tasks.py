"""Tasks of the enrichment example: a simulated CRM and enrichment service."""

from __future__ import annotations

import asyncio

from tether import task

DOMAINS = ["acme.com", "globex.com", "initech.com", "umbrella.com", "hooli.com"]


@task("crm.list_leads")
def list_leads(campaign: str, limit: int) -> list[dict[str, object]]:
    """The leads of a campaign (deterministic)."""
    return [
        {"email": f"lead{i}@{DOMAINS[i % len(DOMAINS)]}", "position": i}
        for i in range(limit)
    ]


@task("crm.enrich_lead")
async def enrich_lead(email: str, position: int) -> dict[str, object]:
    """Look a lead's company up (an async call to a slow service)."""
    await asyncio.sleep(0.01)
    domain = email.split("@")[1]
    company = domain.split(".")[0].title()
    return {"email": email, "company": company, "employees": 50 * (position + 1)}


@task("crm.summarise")
def summarise(leads: list[dict[str, object]]) -> dict[str, object]:
    """Totals per company."""
    companies: dict[str, int] = {}
    for lead in leads:
        name = str(lead["company"])
        companies[name] = companies.get(name, 0) + 1
    return {"leads": len(leads), "companies": dict(sorted(companies.items()))}
