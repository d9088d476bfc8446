"""The test tasks, and the recorder that counts executions of task bodies.

Every body appends one JSON line ``{"pid", "eid", "task", "args"}`` to the effects file (flushed and
fsynced before the body returns), so a line exists for every execution that got that far,
even when the process is killed right after. The line is written first, then the crash hook
runs: a ``task:`` crash leaves a recorded side effect whose result was never returned.
"""

from __future__ import annotations

import functools
import inspect
import json
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from harness import crash
from tether import interrupt
from tether.runtime.context import current_execution_id
from tether.runtime.idempotent import idempotent

EFFECTS: Path | None = None
IDEMPOTENT: set[str] = set()  # task names whose bodies are idempotent in the child's plan


def canonical(value: Any) -> str:
    """The JSON text used to compare task arguments and checkpoint inputs."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def record(task: str, args: Mapping[str, Any]) -> None:
    """Append one durable line for one execution of a task body."""
    path = EFFECTS or (Path(os.environ["TETHER_HARNESS_EFFECTS"])
                       if os.environ.get("TETHER_HARNESS_EFFECTS") else None)
    if path is None:
        return
    if task in IDEMPOTENT:
        crash.body_started()
    line = json.dumps({"pid": os.getpid(), "eid": current_execution_id(), "task": task,
                       "args": canonical(dict(args))})
    with path.open("a", encoding="utf-8") as handle:
        handle.write(line + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def read_effects(path: Path) -> list[dict[str, Any]]:
    """The recorded executions, in order."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


# -- the tasks of the harness workflows ------------------------------------------------------
def step(name: str) -> dict[str, Any]:
    record("h.step", {"name": name})
    crash.task_hook(name)
    return {"name": name, "done": True}


def item(index: int) -> dict[str, Any]:
    record("h.item", {"index": index})
    crash.task_hook(f"item:{index}")
    return {"index": index, "square": index * index}


def draft(attempt: int, feedback: str = "") -> dict[str, Any]:
    record("h.draft", {"attempt": attempt, "feedback": feedback})
    crash.task_hook("draft")
    return {"text": f"draft {attempt}" + (f" after '{feedback}'" if feedback else ""),
            "attempt": attempt}


def judge(attempt: int, text: str) -> dict[str, Any]:
    record("h.judge", {"attempt": attempt, "text": text})
    crash.task_hook("judge")
    return {"score": 3 * attempt, "feedback": f"more (pass {attempt})"}


def charge(amount: int, text: str) -> dict[str, Any]:
    """The side effect: an @idempotent node must run this body once per run."""
    record("h.charge", {"amount": amount, "text": text})
    crash.task_hook("charge")
    return {"charged": amount, "receipt": f"R-{amount}-{len(text)}"}


def ask(subject: str) -> dict[str, Any]:
    """Asks a human mid-body; the code after interrupt() is the counted side effect."""
    answer = interrupt("approve", {"subject": subject})
    record("h.ask", {"subject": subject, "answer": dict(answer)})
    crash.task_hook("ask")
    return {"subject": subject, **dict(answer)}


def apply(decision: dict[str, Any]) -> dict[str, Any]:
    record("h.apply", {"decision": decision})
    crash.task_hook("apply")
    return {"applied": decision.get("approved"), "by": decision.get("by")}


def _poll(task: str, target: int) -> dict[str, Any]:
    """The n-th execution of ``task``'s body in this run (counted in the effects file)."""
    done_before = sum(1 for line in read_effects(EFFECTS) if EFFECTS is not None
                      and line["task"] == task and line["eid"] == current_execution_id())
    n = done_before + 1
    record(task, {"target": target, "n": n})
    crash.task_hook(f"{task}:{n}")
    return {"n": n, "done": n >= target}


def poll(target: int) -> dict[str, Any]:
    """A status check for ``until``: done at its ``target``-th execution."""
    return _poll("h.poll", target)


@idempotent
def poll_once(target: int) -> dict[str, Any]:
    """The same as an ``@idempotent`` function: each poll attempt's body must run once."""
    return _poll("h.poll_once", target)


TASKS: dict[str, Callable[..., Any]] = {
    "h.step": step, "h.item": item, "h.draft": draft, "h.judge": judge,
    "h.charge": charge, "h.ask": ask, "h.apply": apply, "h.poll": poll,
    "h.poll_once": poll_once,
}

# -- the examples' tasks, recorded -------------------------------------------------------------
EXAMPLE_TASK_MODULES = ("refund", "review_loop", "enrichment", "fulfilment", "order")


def _recorded(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with a recorder and the crash hook around its body (same qualified name, so
    idempotency keys are the ones production computes)."""
    if inspect.iscoroutinefunction(fn):
        @functools.wraps(fn)
        async def async_body(**kwargs: Any) -> Any:
            record(name, kwargs)
            crash.task_hook(name)
            return await fn(**kwargs)
        return async_body

    @functools.wraps(fn)
    def body(**kwargs: Any) -> Any:
        record(name, kwargs)
        crash.task_hook(name)
        return fn(**kwargs)
    return body


def example_tasks() -> dict[str, Callable[..., Any]]:
    """The examples' registered tasks, each body recorded. A function decorated with
    ``@idempotent`` is rebuilt as ``@idempotent`` over the recorded raw body, so the recorder
    counts executions of the body, not calls of the cached wrapper."""
    from harness import EXAMPLES
    from tether.runtime.registry import REGISTRY, import_tasks

    import_tasks([str(EXAMPLES / module / "tasks.py") for module in EXAMPLE_TASK_MODULES])
    tasks: dict[str, Callable[..., Any]] = {}
    for name, fn in REGISTRY.items():
        if getattr(fn, "__tether_idempotent__", False):
            tasks[name] = idempotent(_recorded(name, inspect.unwrap(fn)))
        else:
            tasks[name] = _recorded(name, fn)
    return tasks


def idempotent_tasks_of(plan: Any) -> set[str]:
    """Task names whose bodies must run once per run: idempotent nodes and @idempotent."""
    from tether.compiler.plan import TaskNode, WorkflowNode
    from tether.runtime.registry import REGISTRY

    names: set[str] = set()

    def visit(level: Any) -> None:
        for node in level.nodes:
            if isinstance(node, TaskNode) and (node.idempotent or getattr(
                    REGISTRY.get(node.task), "__tether_idempotent__", False)):
                names.add(node.task)
            if isinstance(node, WorkflowNode):
                visit(node.workflow.plan)
    visit(plan)
    return names
