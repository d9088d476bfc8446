"""Where the ``.flow`` parser's tables are kept between processes.

Building Lark's LALR tables for ``flow.lark`` costs about 0.3 s of CPU per parser, more
than the rest of checking a small file; Lark can save them and load them back in a few
milliseconds (its ``cache`` option). Lark names the file's content by a hash of the grammar,
the options, Lark's version and Python's, so a changed grammar is built again and the file
rewritten; a damaged file is built again too (Lark's logger, silent below CRITICAL, takes
the complaint).

The tables are pickled, so a file is used only where nobody else could have written it: a
directory of the current user's (``$TETHER_CACHE_DIR``, else ``$XDG_CACHE_HOME/tether``,
else ``~/.cache/tether``; created 0700), not writable by group or others, and a file owned
by the user. Anywhere else, or when the directory cannot be made, nothing is cached and the
tables are built, as before.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

__all__ = ["cache_directory", "table_file"]


def cache_directory() -> Path | None:
    """The user's tether cache directory (made if missing), or None when there is no safe
    one."""
    explicit = os.environ.get("TETHER_CACHE_DIR", "").strip()
    if explicit:
        directory = Path(explicit)
    else:
        base = os.environ.get("XDG_CACHE_HOME", "").strip()
        try:
            directory = (Path(base) if base else Path.home() / ".cache") / "tether"
        except RuntimeError:  # no home directory to be found
            return None
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
    except OSError:
        return None
    private = info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return directory if private and stat.S_ISDIR(info.st_mode) else None


def table_file(name: str) -> str | None:
    """The path of the cached tables called ``name``, or None when they must not be cached
    (no private directory, or a file there that another user owns or that is no file)."""
    directory = cache_directory()
    if directory is None:
        return None
    path = directory / f"{name}.lark-tables"
    try:
        info = path.lstat()
    except FileNotFoundError:
        return str(path)
    except OSError:
        return None
    return str(path) if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() else None
