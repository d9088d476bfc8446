"""Setting up a TracerProvider from the standard ``OTEL_*`` environment variables.

``tether run|resume|fork|answer|worker|serve`` call :func:`configure_tracing` before they run
anything. It does nothing when a provider is installed already (the host application's),
when no exporter is asked for (no ``OTEL_TRACES_EXPORTER`` and no OTLP endpoint variable),
or when ``OTEL_SDK_DISABLED`` is true. Otherwise it installs the SDK's provider (its resource
from ``OTEL_SERVICE_NAME`` and ``OTEL_RESOURCE_ATTRIBUTES``, default service name
``tether``; its sampler from ``OTEL_TRACES_SAMPLER``) with one processor per exporter:

- ``console``: every span printed on stdout as it ends (a simple processor);
- ``otlp``: OTLP over HTTP/protobuf to ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` or
  ``OTEL_EXPORTER_OTLP_ENDPOINT`` (default ``http://localhost:4318``), batched.

The provider is shut down (its batch flushed) when the process exits.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping

log = logging.getLogger(__name__)

COMMANDS = frozenset({"run", "resume", "fork", "answer", "worker", "serve"})
"""The commands that execute runs, and set tracing up from the environment."""

_TRUE = frozenset({"1", "true", "yes", "on"})


def wanted_exporters(environ: Mapping[str, str]) -> list[str]:
    """The exporters the environment asks for (``OTEL_TRACES_EXPORTER``, comma-separated;
    ``otlp`` when only an OTLP endpoint is set; none when the SDK is disabled)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() in _TRUE:
        return []
    names = [n.strip().lower() for n in environ.get("OTEL_TRACES_EXPORTER", "").split(",")
             if n.strip()]
    if not names and (environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")
                      or environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")):
        names = ["otlp"]
    return [n for n in names if n != "none"]


def configure_tracing(environ: Mapping[str, str] | None = None) -> bool:
    """Install a TracerProvider as the environment asks (see the module docstring).

    Returns:
        Whether spans are now recorded (by this provider or the host's).
    """
    env = os.environ if environ is None else environ
    names = wanted_exporters(env)
    if not names:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        log.warning("OTEL_TRACES_EXPORTER is set but the OpenTelemetry SDK is not installed "
                    "(pip install 'tether[otel]'): no traces")
        return False
    if not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return True  # the host's provider
    named = env.get("OTEL_SERVICE_NAME") or "service.name=" in env.get(
        "OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else
                                                       {"service.name": "tether"}))
    added = 0
    for name in names:
        added += _add_exporter(provider, name, env)
    if not added:
        return False
    trace.set_tracer_provider(provider)
    return True


def _add_exporter(provider: object, name: str, env: Mapping[str, str]) -> int:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        ConsoleSpanExporter,
        SimpleSpanProcessor,
    )

    assert isinstance(provider, TracerProvider)
    if name == "console":
        provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter()))
        return 1
    if name != "otlp":
        log.warning("OTEL_TRACES_EXPORTER: unknown exporter %r (tether knows console, otlp, "
                    "none)", name)
        return 0
    protocol = env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or env.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf"
    if protocol != "http/protobuf":
        log.warning("OTEL_EXPORTER_OTLP_PROTOCOL=%s: tether exports OTLP over http/protobuf "
                    "only; using that", protocol)
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    except ImportError:
        log.warning("OTEL_TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http "
                    "(pip install 'tether[otel]'): no traces")
        return 0
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return 1
