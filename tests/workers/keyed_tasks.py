"""Task module of the concurrency-key proofs across PID namespaces, SIGSTOP and network
namespaces (``test_keys_namespaces.py``, ``test_keys_partition.py``).

Every node body appends ``start RID NODE WORKER`` and ``end RID NODE WORKER`` to the ledger
(``$TETHER_TEST_EFFECTS``, one O_APPEND write per line: the file's order is the order of the
events across processes, hosts and namespaces). ``WORKER`` is ``$TETHER_TEST_WORKER``, not
the pid: a worker alone in its PID namespace is pid 1 there, like every other. With
``$TETHER_TEST_GATE`` set, the body of node ``$TETHER_TEST_GATE_NODE`` (default ``n1``)
appends its run id to ``GATE.started`` and waits, after its start line, until the file
``GATE`` exists.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from keyproof import mark as _append

import tether


@tether.task
def keyed_step(rid: str, node: str) -> str:
    ledger, worker = os.environ["TETHER_TEST_EFFECTS"], os.environ["TETHER_TEST_WORKER"]
    _append(ledger, f"start {rid} {node} {worker}")
    gate = os.environ.get("TETHER_TEST_GATE")
    if gate and node == os.environ.get("TETHER_TEST_GATE_NODE", "n1"):
        _append(gate + ".started", rid)
        while not Path(gate).exists():
            time.sleep(0.01)
    else:
        time.sleep(float(os.environ.get("TETHER_TEST_HOLD", "0.05")))
    _append(ledger, f"end {rid} {node} {worker}")
    return rid
