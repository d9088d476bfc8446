"""Files stay inside the project: where a ``workflow:`` path may lead, and what diagnostics
may say about a file that is not a workflow.

A sub-workflow path resolves (symlinks and all) inside the directory of the workflow that
names it, or inside the project root: ``[tool.tether] root`` of the nearest
``pyproject.toml`` above that workflow (relative to the file), by default the directory that
holds ``pyproject.toml``; with no ``pyproject.toml``, only the workflow's own directory. A
path anywhere else (``../../elsewhere/creds.yaml``, ``/etc/passwd``, a symlink out) is E706,
and the file is never read: ``tether check`` of a pull request must not print the files of
the machine checking it.
"""

from __future__ import annotations

from pathlib import Path

from tether.diagnostics import Diagnostic

# Codes found before tether knows whether the file is a workflow, whose message may quote its
# text (a token of a syntax error, a duplicate key): their notes keep the code's title only.
_QUOTING = frozenset({"E101", "E102", "E103", "E104", "E105"})
# The file parsed but is not a workflow mapping (no `tether:` key, or not a mapping).
_NOT_A_WORKFLOW = frozenset({"E209", "E204"})


def project_root(start: Path) -> Path | None:
    """The project root of a workflow in directory ``start`` (see the module docstring);
    None without a ``pyproject.toml`` above it."""
    for directory in (start, *start.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return _configured_root(candidate)
    return None


def _configured_root(pyproject: Path) -> Path:
    """``[tool.tether] root`` of ``pyproject`` (relative to it), else its directory; an
    unreadable file or a root that is not a string counts as absent."""
    import tomllib  # (only a workflow naming a sub-workflow reads it)

    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return pyproject.parent
    tool = data.get("tool")
    tether = tool.get("tether") if isinstance(tool, dict) else None
    root = tether.get("root") if isinstance(tether, dict) else None
    return (pyproject.parent / root).resolve() if isinstance(root, str) \
        else pyproject.parent


def allowed_roots(base: Path) -> tuple[Path, ...]:
    """The directories a sub-workflow of a workflow in ``base`` may be in (resolved)."""
    here = base.resolve()
    root = project_root(here)
    return (here,) if root is None or root == here else (here, root.resolve())


def inside(path: Path, roots: tuple[Path, ...]) -> bool:
    """Whether the resolved ``path`` is within one of ``roots``."""
    return any(path.is_relative_to(root) for root in roots)


def not_a_workflow(diagnostics: list[Diagnostic]) -> bool:
    """Whether a sub-workflow file's diagnostics say it is not a workflow at all."""
    return any(d.code in _NOT_A_WORKFLOW or (
        d.code == "E200" and "`tether`" in d.message) for d in diagnostics)


def quotes_the_file(diagnostic: Diagnostic) -> bool:
    """Whether ``diagnostic``'s message may quote text of the file it is about."""
    return diagnostic.code in _QUOTING
