"""Store conformance: ids given by a unique prefix (and checkpoint ids by a unique suffix).

Every test runs against the in-memory, SQLite and PostgreSQL checkpointers (the ``store``
fixture), and attacks the lookup with ids chosen to collide: shared prefixes, LIKE
metacharacters, the last code point before the surrogates, ids that are prefixes of others.

Checks the protocol IdLookup (``tether.stores.contracts``).
"""

from __future__ import annotations

import pickle

import pytest
from helpers import new_run, row

from tether.errors import (
    AmbiguousId,
    CheckpointNotFound,
    IdTooShort,
    NotFoundError,
    RunNotFound,
    UsageError,
)
from tether.stores.base import Checkpointer
from tether.stores.idprefix import SHOWN, upper_bound

pytestmark = pytest.mark.protocol("IdLookup")


def test_an_exact_execution_id_wins_even_when_short_or_a_prefix_of_others(
        store: Checkpointer) -> None:
    """An id that exists is itself, though shorter than 8 and a prefix of other ids."""
    for eid in ("abc", "abcdefgh", "abcdefgh-1", "abcdefgh-2"):
        new_run(store, eid)
    assert store.resolve_execution_id("abc") == "abc"
    assert store.resolve_execution_id("abcdefgh") == "abcdefgh"
    assert store.resolve_execution_id("abcdefgh-2") == "abcdefgh-2"


def test_a_unique_prefix_of_eight_or_more_names_the_run(store: Checkpointer) -> None:
    """A prefix one run starts with resolves to that run; 8 characters are enough."""
    eid = new_run(store)
    other = new_run(store, "z" + eid[1:])
    assert store.resolve_execution_id(eid[:8]) == eid
    assert store.resolve_execution_id(eid[:20]) == eid
    assert store.resolve_execution_id(other[:9]) == other


def test_a_prefix_under_eight_characters_is_a_usage_error(store: Checkpointer) -> None:
    """Seven characters that are no exact id are refused as too short, even if unique."""
    eid = new_run(store)
    with pytest.raises(IdTooShort) as caught:
        store.resolve_execution_id(eid[:7])
    assert isinstance(caught.value, UsageError)
    assert "at least 8 characters" in str(caught.value)


def test_an_unknown_prefix_is_run_not_found_naming_it(store: Checkpointer) -> None:
    """A prefix no run starts with raises RunNotFound (a LookupError) with the text."""
    new_run(store, "abcdefgh-1")
    with pytest.raises(RunNotFound) as caught:
        store.resolve_execution_id("abcdefgi")
    assert caught.value.execution_id == "abcdefgi"
    assert isinstance(caught.value, LookupError) and isinstance(caught.value, NotFoundError)


def test_an_ambiguous_prefix_lists_the_first_ten_and_counts_them_all(
        store: Checkpointer) -> None:
    """Fourteen runs sharing a prefix: the error lists ten in id order and says 14."""
    made = sorted(new_run(store, f"shared-prefix-{n:02d}") for n in range(14))
    new_run(store, "shared-prefiy-00")
    with pytest.raises(AmbiguousId) as caught:
        store.resolve_execution_id("shared-prefix")
    error = caught.value
    assert (error.total, error.candidates) == (14, made[:SHOWN])
    assert "14 match" in str(error) and "and 4 more" in str(error)
    assert pickle.loads(pickle.dumps(error)).candidates == made[:SHOWN]


def test_like_metacharacters_in_a_prefix_match_only_themselves(store: Checkpointer) -> None:
    """``%``, ``_`` and a backslash are ordinary characters of a prefix, never wildcards."""
    new_run(store, "run_2026-aaa")
    new_run(store, "runX2026-bbb")
    new_run(store, "run%2026-ccc")
    new_run(store, "run\\2026-ddd")
    assert store.resolve_execution_id("run_2026") == "run_2026-aaa"
    assert store.resolve_execution_id("run%2026") == "run%2026-ccc"
    assert store.resolve_execution_id("run\\2026") == "run\\2026-ddd"
    with pytest.raises(RunNotFound):
        store.resolve_execution_id("run%%%%%")


def test_non_ascii_prefixes_and_the_code_point_before_the_surrogates(
        store: Checkpointer) -> None:
    """A prefix ending in U+D7FF (whose successor is a surrogate) and one in U+10FFFF still
    resolve; a run starting with the next code point is not taken for a match."""
    new_run(store, "caf\u00e9-run-\ud7ff-1")
    new_run(store, "caf\u00e9-run-\ue000-2")
    new_run(store, "maximum-\U0010ffff\U0010ffff-3")
    assert store.resolve_execution_id("caf\u00e9-run-\ud7ff") == "caf\u00e9-run-\ud7ff-1"
    assert store.resolve_execution_id("maximum-\U0010ffff") == "maximum-\U0010ffff\U0010ffff-3"
    assert upper_bound("ab\U0010ffff") is None


def test_a_nul_or_empty_text_is_not_found_and_reaches_no_query(store: Checkpointer) -> None:
    """NUL (which PostgreSQL refuses in text) and the empty string are simply unknown."""
    with pytest.raises(RunNotFound):
        store.resolve_execution_id("abcdefgh\x00")
    with pytest.raises(RunNotFound):
        store.resolve_execution_id("")


def _checkpoints(store: Checkpointer, eid: str, ids: list[str]) -> None:
    for index, cid in enumerate(ids):
        store.put(row(eid, f"n{index}", checkpoint_id=cid, node_index=index))


def test_checkpoint_ids_resolve_by_prefix_and_by_suffix_within_their_run(
        store: Checkpointer) -> None:
    """A checkpoint is named by a unique prefix or suffix, and only within its own run."""
    eid, other = new_run(store), new_run(store)
    mine = ["0193aaaa-0000-7000-8000-00000000a001", "0193aaaa-0000-7000-8000-00000000b002"]
    _checkpoints(store, eid, mine)
    _checkpoints(store, other, ["0193cccc-0000-7000-8000-00000000c003"])
    assert store.resolve_checkpoint_id(eid, mine[0]) == mine[0]
    assert store.resolve_checkpoint_id(eid, mine[1][-12:]) == mine[1]
    assert store.resolve_checkpoint_id(eid, "00000000a001") == mine[0]
    with pytest.raises(AmbiguousId) as caught:
        store.resolve_checkpoint_id(eid, "0193aaaa")
    assert (caught.value.total, caught.value.execution_id) == (2, eid)
    with pytest.raises(CheckpointNotFound) as missing:
        store.resolve_checkpoint_id(eid, "0193cccc")
    assert missing.value.checkpoint_id == "0193cccc"
    with pytest.raises(IdTooShort):
        store.resolve_checkpoint_id(eid, "a001")


def test_a_text_that_is_one_ids_prefix_and_anothers_suffix_is_ambiguous(
        store: Checkpointer) -> None:
    """Prefix and suffix matches are counted together: two different ids are ambiguous."""
    eid = new_run(store)
    _checkpoints(store, eid, ["deadbeef-0000-7000-8000-000000000001",
                              "0193bbbb-0000-7000-8000-0000deadbeef"])
    with pytest.raises(AmbiguousId) as caught:
        store.resolve_checkpoint_id(eid, "deadbeef")
    assert caught.value.total == 2


def test_checkpoint_like_metacharacters_and_unknown_runs(store: Checkpointer) -> None:
    """``%`` and ``_`` never act as wildcards in a checkpoint lookup; a run without
    checkpoints has none to match."""
    eid = new_run(store)
    _checkpoints(store, eid, ["0193dddd-0000-7000-8000-000000000001"])
    for text in ("0193dddd%", "%0000001", "0193dd__", "________"):
        with pytest.raises(CheckpointNotFound):
            store.resolve_checkpoint_id(eid, text)
    with pytest.raises(CheckpointNotFound):
        store.resolve_checkpoint_id("no-such-run", "0193dddd")
