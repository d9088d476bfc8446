"""Reading files named by users, safely: only regular files, of a bounded size.

A path can name a directory, a FIFO (reading it waits for a writer forever) or a device
(``/dev/zero`` never ends), directly or behind a symlink. :func:`read_regular_file` refuses
them all without reading a byte.
"""

from __future__ import annotations

import os
import stat

MAX_FILE_BYTES = 64 * 1024 * 1024


class NotRegularFile(Exception):
    """A path that names something other than a regular file of a sensible size; the message
    completes a sentence about the file (``is not a regular file (a FIFO)``)."""


def read_regular_file(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of a regular file, refusing anything else without reading it.

    The file is opened without blocking (a FIFO would otherwise wait for a writer) and
    examined through its descriptor, so what is read is what was checked: not a directory,
    a device such as ``/dev/zero`` behind a symlink, a FIFO, or a file over ``limit`` bytes.

    Raises:
        NotRegularFile: The path is not a regular file, or is too large.
        OSError: The file cannot be opened or read.
    """
    descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        status = os.fstat(descriptor)
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFile(f"is not a regular file ({_file_type(status.st_mode)})")
        if status.st_size > limit:
            raise NotRegularFile(f"is larger than {limit // (1024 * 1024)} MB")
        handle = os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise
    with handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise NotRegularFile(f"is larger than {limit // (1024 * 1024)} MB")
    return data


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


__all__ = ["MAX_FILE_BYTES", "NotRegularFile", "read_regular_file"]
