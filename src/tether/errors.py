"""The exceptions tether raises, all under :class:`TetherError`.

::

    TetherError
    ├── DefinitionError        a workflow, plan, inputs or tasks that cannot be used
    │   ├── WorkflowError      a workflow file has errors (carries every Diagnostic)
    │   ├── PlanError          a plan file or plan data that cannot be used
    │   │   └── PlanMismatch   resuming a run with a plan other than the one it started with
    │   ├── InputError         run inputs that do not match the plan's inputs
    │   └── TaskError          a task that is not registered, or registered twice
    ├── UsageError             (also a ValueError) an argument the caller got wrong
    │   ├── StoreURLError      a store URL that cannot be used
    │   ├── IdTooShort         an id prefix under 8 characters that is no exact id
    │   ├── AmbiguousId        an id prefix that several ids start with (lists them)
    │   ├── InvalidId          an id a new run may not have (a path, whitespace, look-alikes)
    │   └── ForkError          a fork whose state patch leaves an unusable state
    │       └── IneffectivePatch  a fork whose patch could not change what the run does
    ├── NotFoundError          (also a LookupError) no such thing in the store
    │   ├── RunNotFound        no run with this execution id (or prefix)
    │   └── CheckpointNotFound no such checkpoint in this run
    ├── RunStateError          the run is not in a state that allows this
    │   ├── ExecutionExists    a new run was given an execution id that is already used
    │   ├── ResumeError        (alias ChainResumeError) a run cannot be resumed this way
    │   │   ├── TimerNotDue    it waits only for timers that are not due yet
    │   │   ├── ResumeValueError  the resume values do not match the approval's form
    │   │   └── NotContinued   nothing live can continue the run (`tether resume` exits 5)
    │   ├── AlreadyResumed     the run finished, or another resumer holds it
    │   ├── ConcurrencyLimitReached  a run's concurrency key is at its limit (``reject``)
    │   └── LeaseLost          this attempt no longer owns the run (another took it over)
    ├── ExecutionError         a run's own values or templates went wrong while running
    │   ├── NotJSONError       a value that is not JSON (task output, cached result, context)
    │   ├── TemplateLimit      a template exceeded its time or size budget
    │   ├── ValueTooLarge      an output larger than ``max_value_bytes``
    │   └── AgentError         models, tools, conversations (tether.agents.errors)
    └── StoreError             the checkpoint store failed
        ├── SchemaVersionError the database schema is newer than this tether
        └── StoreUnavailable   the store could not be reached (after retrying where safe)
    InvalidId                  (also a ValueError) an id a new run may not have
    ValueTooLarge              a node's output larger than ``max_value_bytes``

    InterruptSignal (BaseException)  control flow: a node suspends for human input

Catch a family to handle every member of it: the CLI maps the families to exit codes
(``tether.cli.main``) and the console to HTTP statuses (``tether.web.app``), each in one
table. The families are disjoint: every public exception has exactly one. Members defined
elsewhere: ``tether.web``'s ``ConfigError`` and ``BadRequest`` (usage), ``NotFound`` (not
found), ``Conflict`` and ``FleetUnavailable`` (run state), ``tether.testing``'s
``ScriptError`` (definition), the attempt's ``StopAtBoundary`` (run state), ``tether.lsp``'s
``NoGraph`` (definition) and ``RenameRefused`` (usage).

Every exception carries structured fields (``execution_id``, ``node_id``, ...) and builds its
message from them. :class:`InterruptSignal` is not an error: it derives from ``BaseException``
so that a task's ``except Exception:`` cannot swallow it; only the runner catches it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datetime import datetime

    from tether.diagnostics import Diagnostic


class Picklable(BaseException):
    """Pickles whatever its constructor takes: the structured fields and the message travel
    as they are (``BaseException`` would call the constructor again with the message alone).

    Errors cross process boundaries (workers, subprocess tests), so every exception tether
    defines derives from this, directly or through :class:`TetherError`.
    """

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), self.args, dict(self.__dict__)))


def _rebuild(cls: type[Picklable], args: tuple[Any, ...],
             fields: dict[str, Any]) -> Picklable:
    error = cls.__new__(cls)
    BaseException.__init__(error, *args)
    error.__dict__.update(fields)
    return error


class TetherError(Picklable, Exception):
    """Base class of every error tether raises (every one pickles: see :class:`Picklable`)."""


class DefinitionError(TetherError):
    """Family: a workflow, plan, inputs or task registry that cannot be used as given."""


class UsageError(TetherError, ValueError):
    """Family: an argument the caller got wrong (an id, a patch, a URL); nothing was
    changed. The CLI exits 2 and the console answers 422."""


class NotFoundError(TetherError, LookupError):
    """Family: no such run or checkpoint in the store (the console answers 404)."""


class RunStateError(TetherError):
    """Family: the run is not in a state that allows what was asked (the console answers
    409)."""


class ExecutionError(TetherError):
    """Family: a run's own values or templates went wrong while it ran."""


class WorkflowError(DefinitionError):
    """A workflow file (or several) has errors; ``diagnostics`` holds all of them."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = diagnostics
        errors = [d for d in diagnostics if d.is_error]
        first = errors[0] if errors else (diagnostics[0] if diagnostics else None)
        summary = f"{first.span}: {first.code}: {first.message}" if first else "invalid workflow"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        super().__init__(summary + more)


class PlanError(DefinitionError):
    """A plan that cannot be read or used."""


class PlanMismatch(PlanError):
    """A run is resumed with a plan that differs from the one it was started with."""

    def __init__(self, execution_id: str, stored: str, given: str, node_id: str | None,
                 detail: str = "") -> None:
        self.execution_id = execution_id
        self.stored_fingerprint = stored
        self.given_fingerprint = given
        self.node_id = node_id
        where = f"; first difference at node '{node_id}'" if node_id else ""
        extra = f" ({detail})" if detail else ""
        super().__init__(
            f"run {execution_id} was started with plan {stored[:12]}, not {given[:12]}"
            f"{where}{extra}"
        )


class InputError(DefinitionError):
    """Run inputs that do not match the plan's declared inputs."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid inputs: " + "; ".join(problems))


class TaskError(DefinitionError):
    """A task name that is not registered, or a name registered by two functions."""

    def __init__(self, message: str, *, task: str | None = None, node_id: str | None = None):
        self.task = task
        self.node_id = node_id
        super().__init__(message)


class NotJSONError(ExecutionError):
    """A value that cannot be stored as JSON."""

    def __init__(self, what: str, reason: str, *, node_id: str | None = None) -> None:
        self.what = what
        self.reason = reason
        self.node_id = node_id
        super().__init__(f"{what} is not JSON: {reason}")


class RunNotFound(NotFoundError):
    """No run with this execution id exists in the store."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        super().__init__(f"no run with execution id '{execution_id}'")


class CheckpointNotFound(NotFoundError):
    """No checkpoint with this id exists in the run."""

    def __init__(self, execution_id: str, checkpoint_id: str | None,
                 reason: str | None = None) -> None:
        self.execution_id = execution_id
        self.checkpoint_id = checkpoint_id
        what = f"checkpoint '{checkpoint_id}'" if checkpoint_id else "a checkpoint"
        if reason is not None:
            super().__init__(f"run {execution_id}: {what} {reason}")
        else:
            super().__init__(f"run {execution_id} has no {what}")


class ForkError(UsageError):
    """A fork whose state patch leaves a state the plan cannot run; nothing was written."""

    def __init__(self, execution_id: str, problems: list[str]) -> None:
        self.execution_id = execution_id
        self.problems = problems
        super().__init__(f"cannot fork run {execution_id}: the patched state is not usable: "
                         + "; ".join(problems))


class IneffectivePatch(ForkError):
    """A fork whose ``--patch`` could not change what the forked run does: it forks from the
    run's end (nothing is left to run), or it names nothing a node still to run reads.
    ``keys`` are the patch keys at fault; nothing was written."""

    def __init__(self, execution_id: str, reason: str, keys: Sequence[str] = ()) -> None:
        self.reason = reason
        self.keys = list(keys)
        super().__init__(execution_id, [reason])
        self.args = (f"cannot fork run {execution_id}: {reason}; nothing was written",)


class IdTooShort(UsageError):
    """An id given by a prefix shorter than ``minimum`` characters that is no exact id."""

    def __init__(self, what: str, text: str, minimum: int) -> None:
        self.what = what
        self.text = text
        self.minimum = minimum
        super().__init__(f"{what} '{text}' is not an exact id, and a prefix needs at least "
                         f"{minimum} characters")


class AmbiguousId(UsageError):
    """An id prefix that several ids start with; ``candidates`` lists the first of them and
    ``total`` counts them all."""

    def __init__(self, what: str, text: str, candidates: Sequence[str], total: int,
                 *, execution_id: str | None = None) -> None:
        self.what = what
        self.text = text
        self.candidates = list(candidates)
        self.total = total
        self.execution_id = execution_id
        more = total - len(self.candidates)
        listed = ", ".join(self.candidates) + (f" and {more} more" if more > 0 else "")
        where = f" in run {execution_id}" if execution_id else ""
        super().__init__(f"{what} '{text}' is ambiguous{where}: {total} match ({listed}); "
                         "give more characters")


class ExecutionExists(RunStateError):
    """A new run was given an execution id that already names a run."""

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        super().__init__(
            f"a run with execution id '{execution_id}' already exists; resume it instead"
        )


class ResumeError(RunStateError):
    """A run cannot be resumed the way it was asked (for example, without a needed value)."""

    def __init__(self, execution_id: str, message: str, *, node_id: str | None = None) -> None:
        self.execution_id = execution_id
        self.node_id = node_id
        super().__init__(f"run {execution_id}: {message}")


ChainResumeError = ResumeError


class TimerNotDue(ResumeError):
    """The run waits only for timers that are not due yet (``due_at``: the soonest, Unix
    seconds); nothing was changed."""

    def __init__(self, execution_id: str, message: str, *, due_at: float,
                 node_id: str | None = None) -> None:
        self.due_at = due_at
        super().__init__(execution_id, message, node_id=node_id)


class ResumeValueError(ResumeError):
    """Resume values that do not match the approval node's form; nothing was changed."""

    def __init__(self, execution_id: str, node_id: str, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            execution_id,
            f"the resume values for node '{node_id}' do not match its form: "
            + "; ".join(problems),
            node_id=node_id,
        )


class AlreadyResumed(RunStateError):
    """The run finished already, or another resumer claimed it first.

    When another resumer answered the same pause first, ``answered_by`` (who, if known) and
    ``answered_at`` (when) say so.
    """

    def __init__(self, execution_id: str, reason: str = "it has already finished", *,
                 answered_by: str | None = None, answered_at: datetime | None = None) -> None:
        self.execution_id = execution_id
        self.reason = reason
        self.answered_by = answered_by
        self.answered_at = answered_at
        super().__init__(f"run {execution_id} cannot be resumed: {reason}")


class LeaseLost(RunStateError):
    """This attempt lost its lease on the run: another owner took it over (or the lease could
    not be renewed in time). The attempt stopped and wrote nothing more."""

    def __init__(self, execution_id: str, reason: str = "another owner took the run over") \
            -> None:
        self.execution_id = execution_id
        self.reason = reason
        super().__init__(f"run {execution_id}: lost its lease ({reason}); this attempt stopped "
                         "and wrote nothing more")


class TemplateLimit(ExecutionError):
    """A template went over its budget of time or output size while being rendered.

    ``limit`` says which budget (``"time"`` or ``"size"``) and ``detail`` by how much;
    ``node_id`` and ``field`` (``with.amount``) say where, when known.
    """

    def __init__(self, limit: str, detail: str, *, node_id: str | None = None,
                 field: str | None = None) -> None:
        self.limit = limit
        self.detail = detail
        self.node_id = node_id
        self.field = field
        where = "".join([f" of node '{node_id}'" if node_id else "",
                         f" in `{field}`" if field else ""])
        super().__init__(f"template{where} exceeded its {limit} budget: {detail}")

    def at(self, node_id: str | None, field: str | None) -> TemplateLimit:
        """The same limit, placed at a node and field."""
        return TemplateLimit(self.limit, self.detail, node_id=node_id or self.node_id,
                             field=field or self.field)


class StoreURLError(UsageError):
    """A store URL that cannot be used: unknown scheme, bad port or option. ``parameter``
    names the part at fault; the message never holds the password."""

    def __init__(self, message: str, *, parameter: str) -> None:
        self.parameter = parameter
        super().__init__(message)


class StoreError(TetherError):
    """The checkpoint store failed."""


class SchemaVersionError(StoreError):
    """The database holds a schema newer than this version of tether knows."""

    def __init__(self, found: int, known: int) -> None:
        self.found = found
        self.known = known
        super().__init__(
            f"the database schema is version {found}, but this tether knows versions up to "
            f"{known}; upgrade tether"
        )


class StoreUnavailable(StoreError):
    """The store could not be reached."""


class InterruptSignal(Picklable):
    """Raised by :func:`tether.interrupt` to suspend the node; only the runner catches it."""

    def __init__(self, reason: str, context: Any, *, node_id: str | None = None,
                 agent_path: str = "") -> None:
        self.reason = reason
        self.context = context
        self.node_id = node_id
        self.agent_path = agent_path
        super().__init__(reason)


class DedupKeyTaken(RunStateError):
    """A submission's dedup key (``--id``, ``Idempotency-Key``, ``dedup_key=``) already names
    a run of another workflow, so it can neither start a run nor return that one."""

    def __init__(self, key: str, workflow: str) -> None:
        self.key = key
        self.workflow = workflow
        super().__init__(
            f"the dedup key '{key}' already names a run of workflow '{workflow}'; "
            "choose another key")


class ConcurrencyLimitReached(RunStateError):
    """A submission refused because its workflow's concurrency key (``on_conflict: reject``)
    already has ``limit`` runs in progress: ``key`` as rendered, ``limit``, and the execution
    ids of the runs holding it (``holders``). ``tether submit``/``run`` exit 6; the API
    answers 409."""

    def __init__(self, workflow: str, key: str, limit: int,
                 holders: tuple[str, ...] = ()) -> None:
        self.workflow = workflow
        self.key = key
        self.limit = limit
        self.holders = holders
        held = ", ".join(holders[:5]) + (", ..." if len(holders) > 5 else "")
        super().__init__(
            f"workflow '{workflow}': concurrency key '{key}' already has {len(holders)} run"
            f"{'s' if len(holders) != 1 else ''} in progress (limit {limit}"
            + (f": {held}" if held else "") + "); the submission is rejected")


class InvalidId(UsageError):
    """An id that a new run (or checkpoint) may not have: ``what`` names the kind of id,
    ``reason`` says what is wrong (see :func:`tether.runtime.ids.check_execution_id`). Ids
    are data, never paths: ``/``, ``\\``, ``..``, whitespace, control characters and
    non-ASCII look-alikes are refused on creation; ids already stored stay readable."""

    def __init__(self, value: str, what: str, reason: str) -> None:
        self.value = value
        self.what = what
        self.reason = reason
        super().__init__(f"{what} {reason}")


class ValueTooLarge(ExecutionError):
    """A node's output (or a run's result) whose JSON text is larger than
    ``max_value_bytes``: ``node_id`` names the unit (None: the workflow's output), ``size``
    and ``limit`` are bytes."""

    def __init__(self, node_id: str | None, size: int, limit: int) -> None:
        self.node_id = node_id
        self.size = size
        self.limit = limit
        what = f"the output of node '{node_id}'" if node_id else "the workflow's output"
        super().__init__(f"{what} is {size:,} bytes of JSON, more than max_value_bytes "
                         f"({limit:,}); return a reference to large data (a path, a URL, a "
                         "key) instead of the data")


class NotContinued(ResumeError):
    """Neither this process (it lacks the run's tasks) nor a live worker of the run's queue
    can continue the run. Any answer given was recorded and the run is on its queue, so
    either of :attr:`commands` (with the task modules for ``MODULE``) finishes the job.
    ``tether resume`` exits 5 with this error."""

    def __init__(self, execution_id: str, queue: str, missing: Sequence[str],
                 answered: str | None = None) -> None:
        import shlex

        self.queue = queue
        self.missing = tuple(missing)
        self.answered = answered
        run, where = shlex.quote(execution_id), shlex.quote(queue)
        self.commands = (f"tether resume {run} --tasks MODULE",
                         f"tether worker --queue {where} --tasks MODULE")
        lacks = f"lacks its tasks ({', '.join(self.missing)})" if self.missing else \
            "was asked to leave it to the workers"
        self.advice = (f"run `{self.commands[0]}` or `{self.commands[1]}`, MODULE being the "
                       "module(s) defining its tasks (or [tool.tether] tasks in pyproject.toml)")
        done = f"the answer to '{answered}' is recorded and " if answered else ""
        ResumeError.__init__(
            self, execution_id,
            f"not continued: this process {lacks} and no live worker serves queue "
            f"'{queue}'; {done}the run waits on that queue: {self.advice}")
        self.task = self.missing[0] if self.missing else None
