"""paused_gc: the collector is off inside, back on after, and frozen objects stay frozen."""

from __future__ import annotations

import gc

from tether.gc_pause import paused_gc


def test_collector_paused_then_resumed_with_nothing_left_young() -> None:
    assert gc.isenabled()
    with paused_gc():
        assert not gc.isenabled()
        kept = [[i] for i in range(10_000)]
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 1_000  # the block's objects are not left for a young collection
    assert len(kept) == 10_000


def test_cyclic_garbage_made_inside_is_still_collected() -> None:
    class Cycle:
        pass

    with paused_gc():
        cycle = Cycle()
        cycle.self = cycle  # type: ignore[attr-defined]
        del cycle
    assert any(isinstance(o, Cycle) for o in gc.get_objects())
    gc.collect()
    assert not any(isinstance(o, Cycle) for o in gc.get_objects())


def test_objects_the_process_froze_stay_frozen() -> None:
    """paused_gc must not unfreeze what the process froze (``gc.unfreeze`` would move all of
    it to the oldest generation: the count would drop to 0). The count may still drop by the
    few frozen objects that die meanwhile (the test runner's own), so it is not compared
    exactly."""
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 1_000
        with paused_gc():
            kept = [[i] for i in range(1_000)]
        assert gc.get_freeze_count() > frozen - 500
        assert len(kept) == 1_000
    finally:
        gc.unfreeze()


def test_collector_left_off_when_it_was_off() -> None:
    gc.disable()
    try:
        with paused_gc():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
