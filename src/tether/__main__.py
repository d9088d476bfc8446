"""``python -m tether``: the same as the ``tether`` command."""

from __future__ import annotations

from tether.cli.main import main

if __name__ == "__main__":
    raise SystemExit(main())
