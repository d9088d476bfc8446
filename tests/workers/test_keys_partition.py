"""Concurrency keys with worker hosts in network namespaces and a cut link (issue 26,
*Proofs*): PostgreSQL only (SQLite has no network).

Worker A (host 0, lease 2 s, concurrency 2) holds the first run of key ``main`` (limit 1)
inside node ``n1``. A's link is cut (packets dropped both ways, nothing reset), the test
marks A lost in the ledger, and worker B starts on host 1. ``queue``: two more runs of the
key were queued behind the first; ``cancel_running``: a newer run is submitted after the
cut, asking the held run to stop.
After A's lease expires B takes the held run over (``queue``: runs ``n1`` again and
finishes it, then the others in order; ``cancel_running``: stops it at the boundary before
``n1``, cancelled with ``n0`` done, then runs the newer one). A, still cut off, gives its
run up by its own clock. The store is snapshotted; A's body is released and its link
restored; B is stopped and A claims and finishes a new run of the key (so A has been
connected again for a whole run): the store's rows of the earlier runs are unchanged, not
one late write of A's was accepted. Checked as in ``test_keys_namespaces.py``
(``keyproof.check_outcome``): the store sampled all along never shows two runs of the key
running, the ledger never two runs with a body open (A's stale body left out), nothing ran
twice but the body in flight in A when it was cut off (``queue``: B ran it again).

Needs root and network namespaces: skipped, with the reason, where they cannot be made;
CI runs as root, so it runs there.
"""

from __future__ import annotations

import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from keyproof import LostHolder, spawn_worker
from netns import Hosts, unavailable

from conftest import wait_for

TIMEOUTS = "&connect_timeout=2"
"""A host's connections give up on a silent peer after 2 s (``tcp_user_timeout`` and
keepalives derive from ``connect_timeout``), within A's 2 s lease."""


class HostWorkers:
    """`tether worker` processes of one test, each inside a host's network namespace."""

    def __init__(self, hosts: Hosts, url: str, directory: Path) -> None:
        self.hosts, self.url, self.directory = hosts, url, directory
        self.procs: list[subprocess.Popen[bytes]] = []

    def start(self, i: int, name: str, gate: Path | None = None,
              ) -> tuple[subprocess.Popen[bytes], Path]:
        proc, log = spawn_worker(lambda argv: self.hosts.command(i, argv),
                                 self.hosts.translate(i, self.url) + TIMEOUTS,
                                 self.directory, name, gate)
        self.procs.append(proc)
        return proc, log

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(30)


@pytest.fixture
def workers_on(pg_schema: tuple[str, str], tmp_path: Path) -> Iterator[HostWorkers]:
    """Two hosts (network namespaces), and the workers started on them (ended after)."""
    reason = unavailable()
    if reason is not None:
        pytest.skip(f"network namespaces cannot be made here: {reason}")
    url, schema = pg_schema
    with Hosts(2) as hosts:
        made = HostWorkers(hosts, f"{url}?schema={schema}", tmp_path)
        try:
            yield made
        finally:
            made.close()


def _stop(worker: subprocess.Popen[bytes]) -> int:
    worker.send_signal(signal.SIGTERM)
    return worker.wait(60)


def _gave_up(log_a: Path) -> None:
    """A, still cut off, gave its run up by its own clock, and keeps running."""
    wait_for(lambda: "could not be renewed in time" in log_a.read_text(), 60,
             "worker A, cut off, to give its run up by its own clock")


@pytest.mark.parametrize("policy", ["queue", "cancel_running"])
def test_a_keyed_run_held_by_a_cut_off_worker(workers_on: HostWorkers, tmp_path: Path,
                                             policy: str) -> None:
    hosts = workers_on.hosts
    LostHolder(workers_on.url, tmp_path, policy,
               start=lambda name, gate: workers_on.start(0 if name == "A" else 1, name, gate),
               lose=lambda a: hosts.cut(0), regain=lambda a: hosts.restore(0), stop=_stop,
               while_lost=_gave_up).prove(wait_for)
