"""Did-you-mean suggestions for names that are almost right (difflib, as rustc and mypy do)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The choice closest to ``word``, if one is close enough to be a likely typo."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return close[0] if close else None


def did_you_mean(word: str, choices: Iterable[str]) -> str | None:
    """A help line suggesting the closest of ``choices``, if any is close enough."""
    match = closest(word, choices)
    return f"did you mean `{match}`?" if match is not None else None


__all__ = ["closest", "did_you_mean"]
