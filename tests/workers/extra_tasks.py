"""A task module only some workers of the plan-version proof import."""

from __future__ import annotations

import tether


@tether.task
def special(rid: str) -> str:
    return f"special {rid}"
