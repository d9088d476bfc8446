"""``GET /metrics`` on the console (``tether serve``): the same auth as every other route.

Without ``--auth`` the console listens on loopback and anyone local reads it; with
``--auth token`` a scraper sends ``Authorization: Bearer <token>`` (Prometheus's
``authorization`` scrape setting) of any user, viewer or approver.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from typing import Any

from fastapi import FastAPI
from starlette.responses import PlainTextResponse, Response

from tether.stores.base import Checkpointer


def add_metrics_route(app: FastAPI, store: Checkpointer) -> None:
    """Serve the process's metrics and the store's gauges at ``/metrics`` on ``app``."""
    from tether.web.api import Reader

    if importlib.util.find_spec("prometheus_client") is None:  # the extra is missing
        @app.get("/metrics", dependencies=[Reader], include_in_schema=False)
        def no_metrics() -> Response:
            return PlainTextResponse("metrics need prometheus-client: pip install "
                                     "'tether[metrics]'\n", status_code=501)
        return

    from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

    from tether.observability.metrics import StoreCollector, enable
    from tether.workers.claims import lease_seconds

    counted = enable()
    registry = CollectorRegistry()
    registry.register(_Joined(counted.registry))
    registry.register(StoreCollector(lambda: store, lease_seconds()))

    @app.get("/metrics", dependencies=[Reader], include_in_schema=False)
    def metrics() -> Response:
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)


class _Joined:
    """The process's counted metrics, inside one app's registry (a collector)."""

    def __init__(self, registry: Any) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Any]:
        yield from self.registry.collect()
