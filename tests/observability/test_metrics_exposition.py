"""The counts a run reports at each node and claim (runs started and finished, node attempts
and their durations, claim latency) are kept per thread as plain numbers and exposed at each
scrape: the text a scrape reads is the one prometheus-client's own ``Counter`` and
``Histogram`` give for the same events (the same families, samples, labels, values and order;
only the ``_created`` times differ), and counts from several threads at once, some of them
ended by the scrape, are all kept."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    enable_created_metrics,
    generate_latest,
)

from tether.observability.metrics import DURATION_BUCKETS, Metrics
from tether.stores.write_group import WriteGroup

EVENTS: list[tuple[str, tuple[object, ...]]] = [
    ("node", ("flow", "task", "completed", 0.0004)),
    ("node", ("flow", "task", "completed", 0.001)),  # on a bound: that bucket (le)
    ("node", ("flow", "task", "completed", 0.0)),
    ("node", ("flow", "task", "failed", 7200.0)),  # above the last bound: +Inf only
    ("node", ("flow", "task", "skipped", None)),  # counted, not timed: a series of 0
    ("node", ("flow", "approval", "interrupted", 12.5)),
    ("node", ("other", "agent", "completed", 0.3)),
    ("node", ("flow", "task", "completed", 3600.0)),
    ("started", ("flow",)),
    ("started", ("other",)),
    ("started", ("flow",)),
    ("finished", ("flow", "completed")),
    ("finished", ("other", "failed")),
    ("finished", ("flow", "completed")),
    ("claimed", (0.2,)),
    ("claimed", (-0.5,)),  # a clock step back: counted as 0
    ("claimed", (4000.0,)),
]


Reference = tuple[Counter, Counter, Counter, Histogram, Histogram]


def _reference(registry: CollectorRegistry) -> Reference:
    """The families as prometheus-client's own metrics (the first version's) declared them."""
    return (
        Counter("tether_runs_started", "Runs started (first execution).",
                           ["workflow"], registry=registry),
        Counter("tether_runs_finished", "Runs ended, by final status.",
                            ["workflow", "status"], registry=registry),
        Counter("tether_node_attempts", "Node attempts (units), by outcome.",
                            ["workflow", "kind", "status"], registry=registry),
        Histogram("tether_node_duration_seconds", "Time a node attempt ran.",
                              ["workflow", "kind", "status"], buckets=DURATION_BUCKETS,
                              registry=registry),
        Histogram("tether_claim_latency_seconds", "Time a queued run waited, claimable, "
                  "before a worker claimed it.", buckets=DURATION_BUCKETS, registry=registry),
    )


def _feed(metrics: Metrics, reference: Reference) -> None:
    started, finished, attempts, duration, claims = reference
    for kind, args in EVENTS:
        if kind == "node":
            workflow, node_kind, status, seconds = args
            metrics.node_finished(str(workflow), str(node_kind), str(status),
                                  seconds if isinstance(seconds, float) else None)
            attempts.labels(workflow, node_kind, status).inc()
            timed = duration.labels(workflow, node_kind, status)
            if isinstance(seconds, float):
                timed.observe(seconds)
        elif kind == "claimed":
            waited = float(str(args[0]))
            metrics.claimed(waited)
            claims.observe(max(0.0, waited))
        elif kind == "started":
            metrics.run_started(str(args[0]))
            started.labels(*args).inc()
        else:
            metrics.run_finished(str(args[0]), str(args[1]))
            finished.labels(*args).inc()


def _counted_families(text: str) -> str:
    """The lines of the five families, ``_created`` values blanked (they are clock times)."""
    names = ("tether_runs_started", "tether_runs_finished", "tether_node_attempts",
             "tether_node_duration_seconds", "tether_claim_latency_seconds")
    lines = [line for line in text.splitlines()
             if any(name in line for name in names)]
    return "\n".join(re.sub(r"(_created(\{.*\})?) \S+$", r"\1 T", line) for line in lines)


@pytest.fixture(params=["created", "no created"])
def created(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.param == "no created":
        disable_created_metrics()
    try:
        yield
    finally:
        enable_created_metrics()


@pytest.mark.usefixtures("created")
def test_a_scrape_reads_what_prometheus_clients_own_metrics_show() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    metrics = Metrics(ours)
    _feed(metrics, _reference(theirs))
    exposed = _counted_families(generate_latest(ours).decode())
    assert exposed == _counted_families(generate_latest(theirs).decode())
    assert 'le="+Inf"' in exposed
    assert ours.get_sample_value("tether_node_duration_seconds_bucket", {
        "workflow": "flow", "kind": "task", "status": "completed", "le": "0.001"}) == 3.0
    assert ours.get_sample_value("tether_node_duration_seconds_count", {
        "workflow": "flow", "kind": "task", "status": "skipped"}) == 0.0
    assert ours.get_sample_value("tether_runs_started_total", {"workflow": "flow"}) == 2.0
    # the families keep their names in the registry: a second one of them is refused
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        Counter("tether_node_attempts", "again", registry=ours)


def test_counts_from_several_threads_at_once_are_all_kept() -> None:
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    labels = {"workflow": "flow", "kind": "task", "status": "completed"}

    def attempts() -> float:
        return registry.get_sample_value("tether_node_attempts_total", labels) or 0.0

    def wave(threads: int) -> list[float]:
        """``threads`` threads count at once while this one scrapes: what it read."""
        start = threading.Barrier(threads + 1)

        def count() -> None:
            start.wait()
            for i in range(5_000):
                metrics.node_finished("flow", "task", "completed", 0.002 if i % 2 else None)
                if i % 10 == 0:
                    metrics.run_started("flow")

        running = [threading.Thread(target=count) for _ in range(threads)]
        for thread in running:
            thread.start()
        start.wait()
        read = [attempts() for _ in range(20)]  # scrapes while they count
        for thread in running:
            thread.join()
        return read

    read = wave(4)
    assert read == sorted(read)  # a counter never goes back between scrapes
    assert attempts() == 20_000
    assert registry.get_sample_value("tether_node_duration_seconds_count", labels) == 10_000
    assert registry.get_sample_value("tether_node_duration_seconds_bucket",
                                     {**labels, "le": "0.005"}) == 10_000
    assert registry.get_sample_value("tether_node_duration_seconds_sum",
                                     labels) == pytest.approx(20.0)
    assert registry.get_sample_value("tether_runs_started_total", {"workflow": "flow"}) == 2_000
    # a second wave: the first wave's threads have ended, their counts stay
    read = wave(2)
    assert read == sorted(read) and read[0] >= 20_000
    metrics.node_finished("flow", "task", "completed", 0.002)  # and this thread's own
    assert attempts() == 30_001
    assert registry.get_sample_value("tether_runs_started_total", {"workflow": "flow"}) == 3_000


def test_a_workers_write_batch_fallbacks_are_a_counter_read_from_its_write_group() -> None:
    """``tether_write_batch_fallbacks_total``: 0 until a worker is watched, then its write
    group's count of batches written row by row, read at each scrape."""
    registry = CollectorRegistry()
    metrics = Metrics(registry)
    assert registry.get_sample_value("tether_write_batch_fallbacks_total") == 0.0
    group: WriteGroup[int, int] = WriteGroup()
    metrics.watch_write_batches(lambda: group.fallbacks)
    group.fell_back()
    group.fell_back()
    text = generate_latest(registry).decode()
    assert re.search(r"^# TYPE tether_write_batch_fallbacks(_total)? counter$", text, re.M)
    assert "\ntether_write_batch_fallbacks_total 2.0\n" in text
    group.fell_back()
    assert registry.get_sample_value("tether_write_batch_fallbacks_total") == 3.0
