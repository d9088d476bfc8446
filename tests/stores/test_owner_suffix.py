"""The ``@host/pid/...`` part of owner tokens is computed once per process (``owners.py``):
a forked child still names itself, not its parent."""

from __future__ import annotations

import os

import pytest

from tether.stores.owners import new_owner, owner_suffix, parse_owner


def test_tokens_end_with_this_process_suffix_and_differ_in_their_random_part() -> None:
    first, second = new_owner(), new_owner()
    assert first.endswith(owner_suffix()) and second.endswith(owner_suffix())
    assert first != second
    owner = parse_owner(first)
    assert owner is not None and owner.pid == os.getpid() and len(owner.token) == 32


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_names_its_own_pid() -> None:
    parent = owner_suffix()  # cached for this pid before the fork
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its token and leave without running pytest's exit
        try:
            os.write(write, f"{os.getpid()} {new_owner()}".encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child_pid, token = pipe.read().split()
    os.waitpid(pid, 0)
    owner = parse_owner(token)
    assert owner is not None and owner.pid == int(child_pid) == pid
    assert not token.endswith(parent)
    assert parse_owner(new_owner()) is not None and owner_suffix() == parent
