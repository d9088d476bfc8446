"""Prometheus metrics of runs, nodes, queues, workers and agents (prometheus-client).

A process serves them once it asks to (:func:`enable`: ``tether worker --metrics-port``,
``tether serve``'s ``/metrics``); until then nothing is counted and the runtime pays nothing
(``observer.SINK`` is None). Two kinds of metric:

- counted by this process as it works (:class:`Metrics`, the runtime's ``MetricsSink``): runs
  started and finished, node attempts and their durations, claims, lease losses, timers
  fired, agent tokens, busy slots;
- read from the store at scrape time (:class:`StoreCollector`): queue depth and the age of
  the oldest claimable run per queue, stuck runs by reason (the reasons of ``tether runs
  --stuck``, as a bounded label), timers due. Every process scraping the same store reports
  the same values for these: aggregate them with ``max``, not ``sum``.

Labels are bounded sets (workflow, node kind, status, queue, model, reason); never an
execution id.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from enum import StrEnum
from typing import Any

import prometheus_client.metrics
from prometheus_client import CollectorRegistry, Counter, Gauge
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from tether.observability import observer
from tether.observability.counts import Cells, Shares
from tether.observability.counts import Registry as CountsRegistry
from tether.stores.base import Checkpointer

DURATION_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 30.0, 60.0, 300.0,
                    900.0, 3600.0)
"""Node durations run from a millisecond (a noop) to hours (an approval answered late is
not a node duration: a pause ends the attempt)."""

TIMERS_SCAN = 10_000


class StuckReason(StrEnum):
    """The bounded label of ``tether_stuck_runs``: the reasons of ``tether runs --stuck``."""

    START_TIMEOUT = "start_timeout"
    NO_WORKER = "no_worker"
    LEASE_EXPIRED = "lease_expired"
    RECOVERY_FAILING = "recovery_failing"
    BLOCKED = "blocked"


def stuck_reason(text: str) -> StuckReason:
    """The label of one of :func:`tether.workers.stuck.stuck_runs`' reasons."""
    if "longer than the start timeout" in text:
        return StuckReason.START_TIMEOUT
    if text.startswith("no live worker serves queue"):
        return StuckReason.NO_WORKER
    if text.startswith("its lease expired"):
        return StuckReason.LEASE_EXPIRED
    if text.startswith("recovery failed"):
        return StuckReason.RECOVERY_FAILING
    return StuckReason.BLOCKED  # a worker recorded why: it lacks the plan's tasks


Family = tuple[str, str, tuple[str, ...]]
"""A counted family: its name, help text and label names."""

_RUNS_STARTED: Family = ("tether_runs_started", "Runs started (first execution).",
                         ("workflow",))
_RUNS_FINISHED: Family = ("tether_runs_finished", "Runs ended, by final status.",
                          ("workflow", "status"))
_NODE_ATTEMPTS: Family = ("tether_node_attempts", "Node attempts (units), by outcome.",
                          ("workflow", "kind", "status"))
_NODE_DURATION: Family = ("tether_node_duration_seconds", "Time a node attempt ran.",
                          ("workflow", "kind", "status"))
_CLAIM_LATENCY: Family = ("tether_claim_latency_seconds", "Time a queued run waited, "
                          "claimable, before a worker claimed it.", ())
_FALLBACKS = ("tether_write_batch_fallbacks", "Batched checkpoint writes of a worker's slots "
              "whose statement failed and that were written row by row.")
_BOUNDS = (*DURATION_BUCKETS, float("inf"))
_ZEROS = (0.0,) * len(_BOUNDS)
STARTED, FINISHED, NODES, CLAIMS = range(4)  # the tables of counts.Shares


class Metrics(Collector):
    """The metrics this process counts (the runtime's ``MetricsSink``).

    Runs started and finished, node attempts, their durations and claim latencies (what a
    run reports at each node, and once per claim) are counted per thread without a lock
    (:mod:`tether.observability.counts`) and made, when the registry collects them, into the
    families prometheus-client's ``Counter`` and ``Histogram`` would expose (the same names,
    samples, labels, values and ``_created`` times): a node costs one call, two dict reads
    and a ``bisect``, not the nine calls and three locks of a labelled counter's ``inc`` and
    a histogram's ``observe``. The rest (lease losses, timers, agent tokens, busy slots:
    rarer) are prometheus-client's metrics.

    A cell of the tables: a run counter's ``[created, count]``; a node's ``[created,
    attempts, seconds summed, then one count per bucket (not cumulative)]``; the claims'
    ``[created, seconds summed, counts per bucket]``."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry
        self._les: tuple[str, ...] = tuple(
            floatToGoString(bound) for bound in _BOUNDS)  # type: ignore[no-untyped-call]
        seed = Shares(4)  # (an unlabelled histogram is exposed from its creation on)
        seed.tables[CLAIMS][()] = [time.time(), 0.0, *_ZEROS]
        self._counts = CountsRegistry(4, seed)
        self._local = self._counts.local
        registry.register(self)
        self.lease_losses = Counter("tether_lease_losses", "Attempts stopped because they "
                                    "lost their lease.", registry=registry)
        self.timers_fired = Counter("tether_timers_fired", "Durable timers fired (sleeps, "
                                    "approval timeouts).", registry=registry)
        self.agent_tokens = Counter("tether_agent_tokens", "Tokens of agent model calls.",
                                    ["model", "type"], registry=registry)
        self.slots_busy = Gauge("tether_worker_slots_busy", "Runs this worker executes now.",
                                registry=registry)
        self._fallbacks: Callable[[], int] | None = None  # watch_write_batches

    def run_started(self, workflow: str) -> None:
        _count(self._local.tables[STARTED], (workflow,))

    def run_finished(self, workflow: str, status: str) -> None:
        _count(self._local.tables[FINISHED], (workflow, status))

    def node_finished(self, workflow: str, kind: str, status: str,
                      seconds: float | None) -> None:
        nodes = self._local.tables[NODES]
        key = (workflow, kind, status)
        cell = nodes.get(key)
        if cell is None:
            cell = nodes[key] = [time.time(), 0.0, 0.0, *_ZEROS]
        cell[1] += 1.0
        if seconds is not None:  # (the first bucket whose bound is >= seconds)
            cell[2] += seconds
            cell[3 + bisect_left(_BOUNDS, seconds)] += 1.0

    def claimed(self, waited: float) -> None:
        """A worker claimed a queued run that waited ``waited`` seconds."""
        claims = self._local.tables[CLAIMS]
        cell = claims.get(())
        if cell is None:
            cell = claims[()] = [time.time(), 0.0, *_ZEROS]
        waited = max(0.0, waited)
        cell[1] += waited
        cell[2 + bisect_left(_BOUNDS, waited)] += 1.0

    def describe(self) -> list[Any]:
        return [CounterMetricFamily(name, text, labels=labels)
                for name, text, labels in (_RUNS_STARTED, _RUNS_FINISHED, _NODE_ATTEMPTS)
                ] + [HistogramMetricFamily(name, text, labels=labels)
                     for name, text, labels in (_NODE_DURATION, _CLAIM_LATENCY)
                     ] + [CounterMetricFamily(*_FALLBACKS)]

    def collect(self) -> Iterator[Any]:
        """The counted families, as prometheus-client's Counter and Histogram show them."""
        tables = self._counts.total().tables
        created = prometheus_client.metrics._use_created  # disable_created_metrics()
        for (name, text, labels), table in ((_RUNS_STARTED, tables[STARTED]),
                                            (_RUNS_FINISHED, tables[FINISHED]),
                                            (_NODE_ATTEMPTS, tables[NODES])):
            counter = CounterMetricFamily(name, text, labels=labels)
            for key, cell in table.items():
                counter.add_metric(key, cell[1], cell[0] if created else None)
            yield counter
        for (name, text, labels), table, first in ((_NODE_DURATION, tables[NODES], 2),
                                                   (_CLAIM_LATENCY, tables[CLAIMS], 1)):
            histogram = HistogramMetricFamily(name, text, labels=labels)
            for key, cell in table.items():
                buckets, total = [], 0.0
                for le, count in zip(self._les, cell[first + 1:], strict=True):
                    total += count
                    buckets.append((le, total))
                histogram.add_metric(key, buckets, cell[first])
                if created:
                    histogram.add_sample(name + "_created",
                                         dict(zip(labels, key, strict=True)), cell[0])
            yield histogram
        fallbacks = self._fallbacks
        yield CounterMetricFamily(*_FALLBACKS,
                                  value=float(fallbacks() if fallbacks is not None else 0))

    def tokens(self, model: str, input_tokens: int, output_tokens: int) -> None:
        self.agent_tokens.labels(model, "input").inc(input_tokens)
        self.agent_tokens.labels(model, "output").inc(output_tokens)

    def lease_lost(self) -> None:
        self.lease_losses.inc()

    def timer_fired(self) -> None:
        self.timers_fired.inc()

    def watch_slots(self, busy: Callable[[], int]) -> None:
        """Read the busy slots from the worker at each scrape."""
        self.slots_busy.set_function(lambda: float(busy()))

    def watch_write_batches(self, fallbacks: Callable[[], int]) -> None:
        """Read, at each scrape, how many batched writes of the worker's write group fell
        back to row-by-row writes (``WriteGroup.fallbacks``)."""
        self._fallbacks = fallbacks


def _count(table: Cells, key: tuple[str, ...]) -> None:
    cell = table.get(key)
    if cell is None:
        cell = table[key] = [time.time(), 0.0]
    cell[1] += 1.0


class StoreCollector(Collector):
    """Queue, stuck-run and timer gauges read from the store at each scrape.

    ``connect`` opens the store the collector reads with (its own connection: a scrape
    comes from the HTTP server's thread); it is opened at the first scrape and kept."""

    def __init__(self, connect: Callable[[], Checkpointer], lease: float) -> None:
        self.connect = connect
        self.lease = lease
        self._store: Checkpointer | None = None
        self._lock = threading.Lock()

    def describe(self) -> list[Any]:
        return []  # collected at scrape time only: the registry never calls collect() early

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from tether.workers.stuck import stuck_runs

        with self._lock:
            if self._store is None:
                self._store = self.connect()
            store = self._store
            now = time.time()
            depth, oldest = _queues(store, now, self.lease)
            stuck = stuck_runs(store, now, self.lease)
            due = len(store.due_pending(now, TIMERS_SCAN))
        queue_depth = GaugeMetricFamily("tether_queue_depth", "Runs queued, per queue.",
                                        labels=["queue"])
        age = GaugeMetricFamily("tether_queue_oldest_age_seconds", "Age of the oldest "
                                "claimable queued run, per queue (0 when none).",
                                labels=["queue"])
        for queue in sorted(depth):
            queue_depth.add_metric([queue], depth[queue])
            age.add_metric([queue], oldest.get(queue, 0.0))
        reasons = dict.fromkeys(StuckReason, 0)
        for run in stuck:
            for reason in {stuck_reason(text) for text in run.reasons}:
                reasons[reason] += 1
        stuck_family = GaugeMetricFamily("tether_stuck_runs", "Runs of queues not making "
                                         "progress, by reason (tether runs --stuck).",
                                         labels=["reason"])
        for reason, count in reasons.items():
            stuck_family.add_metric([reason.value], count)
        yield queue_depth
        yield age
        yield stuck_family
        yield GaugeMetricFamily("tether_timers_due", "Durable timers due and not fired yet.",
                                value=due)


def _queues(store: Checkpointer, now: float,
            lease: float) -> tuple[dict[str, int], dict[str, float]]:
    """Queued runs per queue, and the age of each queue's oldest claimable one; every known
    queue (configured, served by a live worker, or holding runs) is reported, 0 when empty
    (so a drained queue reads 0 rather than vanishing)."""
    from tether.workers.stuck import SCAN_LIMIT, live_workers

    depth = {q.name: 0 for q in store.list_queues()}
    depth.update({q: 0 for w in live_workers(store, now, lease) for q in w.queues})
    for counts in store.queue_counts(now):
        depth[counts.queue] = counts.queued
    oldest: dict[str, float] = {}
    for run in store.list_runs("queued", SCAN_LIMIT):
        if run.queue is None or (run.available_at or 0.0) > now:
            continue
        since = max(run.created_at.timestamp(), run.available_at or 0.0)
        oldest[run.queue] = max(oldest.get(run.queue, 0.0), now - since)
    return depth, oldest


_ENABLED: Metrics | None = None
_GUARD = threading.Lock()


def enable(registry: CollectorRegistry | None = None) -> Metrics:
    """Start counting in this process (once; later calls return the same metrics)."""
    global _ENABLED
    with _GUARD:
        if _ENABLED is None:
            _ENABLED = Metrics(registry or CollectorRegistry())
            observer.SINK = _ENABLED
        return _ENABLED


def enabled() -> Metrics | None:
    """This process's metrics, if it counts them."""
    return _ENABLED


def serve(port: int, host: str, connect: Callable[[], Checkpointer], lease: float,
          ) -> Metrics:
    """Count, and serve ``/metrics`` on ``host:port`` (a daemon thread)."""
    from prometheus_client import start_http_server

    metrics = enable()
    metrics.registry.register(StoreCollector(connect, lease))
    start_http_server(port, host, registry=metrics.registry)
    return metrics
