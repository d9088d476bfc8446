"""The pieces of a node's hot path that replaced library calls: checkpoint ids, JSON, and the
sync bridge's Ctrl-C handling (a real process interrupted with SIGINT)."""

from __future__ import annotations

import asyncio
import contextvars
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from conformance_helpers import new_run
from hypothesis import given, settings
from hypothesis import strategies as st

from tether.errors import NotJSONError
from tether.runtime import ids
from tether.runtime.attempt import Attempt
from tether.runtime.bridge import run_sync
from tether.runtime.values import dumps, to_json
from tether.stores.sqlite import SQLiteCheckpointer

# -- checkpoint ids -------------------------------------------------------------------------------


def test_ids_are_valid_uuid7_and_strictly_increasing_within_a_millisecond() -> None:
    generator = ids.IdGenerator()
    made = [generator.next() for _ in range(2000)]  # many share a millisecond
    assert made == sorted(made) and len(set(made)) == len(made)
    for text in made:
        parsed = uuid.UUID(text)
        assert parsed.version == 7 and parsed.variant == uuid.RFC_4122 and str(parsed) == text
    millis = [int(text.replace("-", "")[:12], 16) for text in made]
    assert abs(millis[-1] / 1000 - time.time()) < 60


def test_an_id_follows_the_one_it_is_asked_to_follow_even_from_the_future() -> None:
    generator = ids.IdGenerator()
    ahead = ids._format(ids._uuid7_int(int(time.time() * 1000) + 3_600_000, 5, 7))
    following = generator.next(ahead)
    assert following > ahead and uuid.UUID(following).version == 7
    assert generator.next() > following


def test_a_bump_carries_into_the_next_millisecond_when_the_random_bits_run_out() -> None:
    full = ids._uuid7_int(1000, 0xFFF, (1 << 62) - 1)
    bumped = ids._bump(full)
    assert bumped > full and bumped >> 80 == 1001 and uuid.UUID(int=bumped).version == 7


def test_an_id_counted_on_past_its_upper_half_is_written_out_whole() -> None:
    """The generator keeps the text of an id's upper 64 bits while they stay the same; a
    carry out of the random bits (into rand_a, or into the next millisecond) changes them,
    and the text must follow."""
    generator = ids.IdGenerator()
    ms = int(time.time() * 1000) + 3_600_000  # ahead of the clock: ids count on from here
    for rand_a in (0x123, 0xFFF):  # a carry into rand_a, and one into the next millisecond
        start = ids._uuid7_int(ms, rand_a, (1 << 62) - 3)
        made = [generator.next(ids._format(start))]
        made += [generator.next(made[-1]) for _ in range(5)]
        assert made == sorted(made) and len(set(made)) == 6
        for text in made:
            assert str(uuid.UUID(text)) == text == ids._format(ids._parse(text))
            assert uuid.UUID(text).version == 7
        highs = {ids._parse(text) >> 64 for text in made}
        assert len(highs) == 2  # the carry happened within these six ids


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_never_repeats_its_parents_ids() -> None:
    """Parent and child share the generator's memory at the fork: without starting afresh they
    would count on from the same id in the same millisecond."""
    ids.IDS.next()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: write its ids and leave at once
        os.close(read)
        os.write(write, "\n".join(ids.IDS.next() for _ in range(200)).encode())
        os._exit(0)
    os.close(write)
    mine = {ids.IDS.next() for _ in range(200)}
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    theirs = set(b"".join(chunks).decode().split("\n"))
    assert len(theirs) == 200 and not mine & theirs


# -- JSON -------------------------------------------------------------------------------------

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_dumps_writes_what_json_dumps_writes_and_to_json_reads_it_back(value: Any) -> None:
    text = dumps(value)
    assert text == json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if "\\u0000" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text):
        return  # refused by to_json (NUL, lone surrogates): tested below
    decoded, same = to_json(value, "x")
    assert same == text and decoded == json.loads(text)


@pytest.mark.parametrize(("value", "reason"), [
    ({"a": float("nan")}, "NaN and infinite numbers have no JSON form"),
    ({1: "a"}, "a mapping has a key that is not a string"),
    ({"a": {1, 2}}, "a set has no JSON form (use a list)"),
    (b"x", "bytes have no JSON form"),
    ("a\x00b", "a string contains a NUL character"),
])
def test_values_json_cannot_carry_are_refused_with_the_reason(value: Any, reason: str) -> None:
    with pytest.raises(NotJSONError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        to_json(value, "the output of node 'n'")


def test_a_value_that_contains_itself_is_refused() -> None:
    looped: list[Any] = []
    looped.append(looped)
    with pytest.raises(NotJSONError, match="refers to itself"):
        to_json({"a": looped}, "the output of node 'n'")


# -- the sync bridge --------------------------------------------------------------------------

MARK: contextvars.ContextVar[str] = contextvars.ContextVar("mark", default="unset")


def test_a_sync_call_sees_the_callers_context_and_leaves_sigint_as_it_was() -> None:
    async def read() -> str:
        return MARK.get()

    MARK.set("first")
    assert run_sync(read()) == "first"
    MARK.set("second")
    assert run_sync(read()) == "second"
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler

    def mine(signum: int, frame: Any) -> None:
        """A program's own handler: kept while the call runs and after."""

    previous = signal.signal(signal.SIGINT, mine)
    try:
        async def current() -> Any:
            return signal.getsignal(signal.SIGINT)

        assert run_sync(current()) is mine
        assert signal.getsignal(signal.SIGINT) is mine
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_failed_sync_call_leaves_nothing_running_on_the_loop() -> None:
    started = asyncio.Event()

    async def straggler() -> None:
        started.set()
        await asyncio.sleep(3600)

    async def fail() -> None:
        asyncio.get_running_loop().create_task(straggler())
        await started.wait()
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_sync(fail())

    async def count() -> int:
        return len(asyncio.all_tasks()) - 1

    assert run_sync(count()) == 0


WORKFLOW = """\
tether: 1
name: hold
nodes:
  first: {task: hold.first}
  wait: {needs: [first], task: hold.wait}
  last: {needs: [wait], task: hold.last}
"""

TASKS = """\
import os, time
from pathlib import Path
from tether import task

def note(name):
    with open(os.environ["HOLD_LOG"], "a") as log:
        log.write(name + "\\n")

@task("hold.first")
def first() -> int:
    note("first")
    return 1

@task("hold.wait")
def wait() -> int:
    note("wait")
    marker = Path(os.environ["HOLD_MARKER"])
    if not marker.exists():
        marker.write_text("in")
        time.sleep(float(os.environ["HOLD_SECONDS"]))
    return 2

@task("hold.last")
def last() -> int:
    note("last")
    return 3
"""


@pytest.mark.parametrize(("hold", "signals", "ran"), [
    (1.5, 1, ["first", "wait", "last"]),  # stops at the next node boundary: wait is kept
    (600, 2, ["first", "wait", "wait", "last"]),  # the second stops the body itself
])
def test_ctrl_c_stops_tether_run_with_130_and_the_run_resumes_at_once(
        tmp_path: Path, hold: float, signals: int, ran: list[str]) -> None:
    """SIGINT to `tether run` while a node's sync body runs in place: the first stops the run
    at the next node boundary (the body finishes and is recorded), a second one at once; exit
    130, no traceback, the lease released (`tether resume` continues at once, not after the
    lease), and nothing that completed runs again."""
    (tmp_path / "hold.yaml").write_text(WORKFLOW)
    (tmp_path / "hold_tasks.py").write_text(TASKS)
    marker, log = tmp_path / "marker", tmp_path / "ran.log"
    env = {**os.environ, "TETHER_DB": f"sqlite:///{tmp_path / 'hold.db'}",
           "HOLD_MARKER": str(marker), "HOLD_LOG": str(log), "HOLD_SECONDS": str(hold)}
    command = [sys.executable, "-m", "tether"]
    process = subprocess.Popen([*command, "run", "hold.yaml", "--tasks", "hold_tasks.py",
                                "--execution-id", "held"], cwd=tmp_path, env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not marker.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.02)
    for _ in range(signals):
        time.sleep(0.2)
        process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 130, (out, err)
    assert "Traceback" not in err
    with sqlite3.connect(tmp_path / "hold.db") as db:
        status, owner = db.execute("SELECT status, owner FROM runs WHERE execution_id = 'held'"
                                   ).fetchone()
    assert (status, owner) == ("running", None)
    resumed = subprocess.run([*command, "resume", "held", "--tasks", "hold_tasks.py", "--json"],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
                             check=False)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout)["status"] == "completed"
    assert log.read_text().split() == ran


# -- the lease heartbeat ----------------------------------------------------------------------


def _lease(store: SQLiteCheckpointer, execution_id: str) -> float:
    record = store.get_run(execution_id)
    assert record is not None and record.lease_until is not None
    return record.lease_until


def test_a_short_lease_is_renewed_in_time_while_the_heartbeat_waits_for_a_long_one(
        tmp_path: Path) -> None:
    """The heartbeat thread wakes for a new attempt only when it is due before the thread's
    current wait ends: an attempt with a 0.6 s lease registered while it waits ~100 s for a
    300 s one is renewed every 0.2 s all the same."""
    store = SQLiteCheckpointer(tmp_path / "beat.db")
    long_id, short_id = new_run(store), new_run(store)
    with Attempt(store, long_id, 300.0) as long_held:
        assert store.acquire(long_id, long_held.token, long_held.until(), time.time())
        time.sleep(0.1)  # the thread is now waiting for the long lease's renewal
        with Attempt(store, short_id, 0.6) as short_held:
            assert store.acquire(short_id, short_held.token, short_held.until(), time.time())
            first = _lease(store, short_id)
            deadline = time.monotonic() + 10
            while _lease(store, short_id) == first:
                assert time.monotonic() < deadline, "the short lease was never renewed"
                time.sleep(0.02)
            assert short_held.lost is None and long_held.lost is None
    store.close()
