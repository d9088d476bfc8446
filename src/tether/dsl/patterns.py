"""The patterns of the names a workflow declares, in a module of their own: reading a stored
plan checks secret names with them without importing the document model (pydantic)."""

from __future__ import annotations

import re

ID_PATTERN = r"^[a-z][a-z0-9_]*$"
ID_RE = re.compile(ID_PATTERN)
NODE_ID_PATTERN = r"^[A-Za-z][A-Za-z0-9_-]*$"
"""Node ids as authors spell them (``build-linux``, ``Deploy``); templates read an id that is
not a plain name as ``nodes['build-linux']``."""
NODE_ID_RE = re.compile(NODE_ID_PATTERN)
SECRET_PATTERN = r"^[A-Z_][A-Z0-9_]*$"
SECRET_RE = re.compile(SECRET_PATTERN)
