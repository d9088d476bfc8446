"""Observability: OpenTelemetry traces, Prometheus metrics and JSON logs (docs/observability.md).

Nothing here costs a run anything unless it is switched on: tracing only when a real
``TracerProvider`` is installed (by the host application, or by ``tether run|worker|serve``
from the standard ``OTEL_*`` variables: :func:`tether.observability.setup.configure_tracing`),
metrics only once a process serves them (``tether worker --metrics-port``, ``tether serve``'s
``/metrics``). Until then the runtime's hook (:func:`observer_for`) returns None once per run
attempt and every node takes the path it took before.
"""

from __future__ import annotations

from tether.observability.observer import RunObserver, observer_for

__all__ = ["RunObserver", "observer_for"]
