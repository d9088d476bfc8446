"""Driving one attempt of a run to its end: completed, failed, or paused.

The driver runs the top level of the plan under the attempt's lease and writes what ends the
attempt: the terminal ``run_end`` row (completed or failed, with the run's status, in one
transaction), or the pause (the run is ``paused`` once nothing else can proceed; if an answer
was claimed meanwhile for a waiting unit, it is applied and the run goes on instead). Every
write is fenced on the attempt's token. What stops an attempt without ending the run:

- the lease is lost: the driving task is cancelled, nothing more is written, and
  :class:`~tether.errors.LeaseLost` is raised;
- Ctrl-C (``KeyboardInterrupt``): the lease is released at once and the run is left
  ``running``, so ``resume`` continues it without waiting for the lease to expire;
- the store fails (:class:`~tether.errors.StoreError`): raised as it is (never reported as
  completed); the lease is released if the store still answers.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from tether.errors import LeaseLost, StoreError, TetherError
from tether.observability.observer import observer_for
from tether.runtime.answers import apply_decisions
from tether.runtime.attempt import Attempt, StopAtBoundary
from tether.runtime.context import RUN, RunContext
from tether.runtime.events import Event
from tether.runtime.execution import Level, RunFailure, Session, Suspended
from tether.runtime.idempotent import forget_locks
from tether.runtime.journal import Journal
from tether.runtime.render import RunInfo
from tether.runtime.results import RunResult
from tether.runtime.run_events import record_claimed, record_lease_lost, record_released
from tether.runtime.secrets import SecretsView, declared, masked_error, masker_for
from tether.runtime.state import NodeError, RunState
from tether.runtime.values import dumps
from tether.status import RUN_END, CheckpointStatus, RunStatus, StepType
from tether.templating import DEFAULT_BUDGET, TemplateBudget

if TYPE_CHECKING:
    from tether.compiler.plan import Plan


class Driver:
    """Executes ``plan`` over ``state`` for one attempt (see the module docstring)."""

    def __init__(self, execution_id: str, plan: Plan, state: RunState,
                 journal: Journal | None, attempt: Attempt,
                 tasks: Mapping[str, Callable[..., Any]], max_concurrency: int,
                 listener: Callable[[Event], None] | None,
                 budget: TemplateBudget = DEFAULT_BUDGET, info: RunInfo | None = None,
                 inline: bool = True) -> None:
        self.execution_id = execution_id
        self.plan = plan
        self.state = state
        self.journal = journal
        self.attempt = attempt
        store = journal.store if journal is not None else None
        names = declared(plan)
        secrets = SecretsView(names) if names else None
        self.masker = masker_for(plan, secrets)  # (shares the strings secrets' templates make)
        if journal is not None:
            journal.masker = self.masker
        self.session = Session(
            execution_id, journal, tasks, asyncio.Semaphore(max_concurrency),
            max_concurrency, RunContext(execution_id, store, attempt.owner, self.masker),
            attempt, listener, budget=budget, secrets=secrets, info=info, inline=inline)
        self.session.observer = observer_for(
            execution_id, plan.name, attempt.number, info.parent_id if info else None, store,
            claimed=attempt.claimed, first=attempt.first)

    async def drive(self) -> RunResult:
        observer = self.session.observer
        if observer is None:
            return await self._attempt()
        observer.start()
        try:
            result = await self._attempt()
        except BaseException as exc:
            observer.end(RunStatus.RUNNING, exc)  # the attempt stopped; the run goes on
            raise
        observer.end(result.status)
        return result

    async def _attempt(self) -> RunResult:
        token = RUN.set(self.session.run)
        main = asyncio.current_task()
        loop = asyncio.get_running_loop()
        if main is not None:
            def stop() -> None:
                loop.call_soon_threadsafe(main.cancel)

            self.attempt.on_lost = stop
        if self.journal is not None:
            record_claimed(self.attempt)
        try:
            with self.attempt:
                return await self._drive()
        except asyncio.CancelledError:
            if self.attempt.lost is not None:
                record_lease_lost(self.attempt)
                raise LeaseLost(self.execution_id, self.attempt.lost) from None
            self._stop()
            raise
        except KeyboardInterrupt:
            self._stop()
            raise
        except LeaseLost:
            record_lease_lost(self.attempt)
            raise
        except StoreError:  # (no event: the store is what failed)
            self.attempt.release()
            raise
        except TetherError as exc:
            self._release(f"stopped: {type(exc).__name__}")
            raise
        finally:
            self.attempt.on_lost = None
            RUN.reset(token)
            forget_locks(self.execution_id)

    def _stop(self) -> None:
        """Stopped from outside (Ctrl-C, a cancelled caller): let the sync bodies still
        running in threads return (an idempotent body records its result while the lease is
        held), then let the run go, so it can be resumed at once."""
        self.session.bodies.wait()
        self._release("stopped")

    def _release(self, why: str) -> None:
        """Let the run go without ending it (the last node's checkpoint written if it was
        held for the run's end), and say so in its history."""
        if self.journal is not None:
            with contextlib.suppress(TetherError):  # (not written: that node runs again)
                self.journal.flush()
            record_released(self.attempt, why)
        self.attempt.release()

    async def _drive(self) -> RunResult:
        while True:
            try:
                output = await Level(self.session, self.plan, self.state).run(
                    hold_last=True)
            except Suspended:
                if not self._still_answered():
                    return self._paused()
                continue
            except StopAtBoundary as stop:
                return self._stopped(stop)
            except RunFailure as failure:
                return self._end(RunStatus.FAILED, None, failure.error)
            except TetherError:
                raise
            except Exception as exc:  # a failure outside any node: record it, never hide it
                return self._end(RunStatus.FAILED, None, NodeError.of(exc, None))
            return self._end(RunStatus.COMPLETED, output, None)

    def _stopped(self, stop: StopAtBoundary) -> RunResult:
        """Cancelled: end the run ``cancelled``. Handed back: release it, left ``running``."""
        if stop.cancel:
            return self._end(RunStatus.CANCELLED, None, NodeError(
                "RunCancelled", "cancelled (tether cancel) before its next node started",
                None))
        self._stop()
        return RunResult(RunStatus.RUNNING, self.execution_id, None,
                         self._shown(self.state.data),
                         message="handed back at a node boundary; another attempt continues "
                         "it")

    def _still_answered(self) -> bool:
        """Pause, unless answers were claimed meanwhile: then apply them (True: go on)."""
        journal = self.journal
        assert journal is not None  # without a store, interrupt() raises to the caller
        journal.flush()  # (the last node's checkpoint, held for a run's end)
        journal.check()
        waiting = list(self.state.waiting(self.plan))
        decisions = journal.store.pause_run(self.execution_id, journal.owner, waiting)
        changed = apply_decisions(self.plan, self.state, decisions)
        for path in changed:
            journal.mark(path)
        return bool(changed)

    def _paused(self) -> RunResult:
        assert self.journal is not None
        record_released(self.attempt, "paused")
        pending = tuple(self.journal.store.list_pending(self.execution_id))
        return RunResult(RunStatus.PAUSED, self.execution_id, None, self._shown(self.state.data),
                         pending)

    def _shown(self, value: Any) -> Any:
        """``value`` as a result may show it: without any secret's value."""
        return self.masker.value(value) if self.masker is not None else value

    def _end(self, status: RunStatus, output: Any, error: NodeError | None) -> RunResult:
        journal = self.journal
        if error is not None and self.masker is not None:
            error = masked_error(self.masker, error)
        output = self._shown(output)
        if journal is not None:
            payload = dumps(error.to_json() if error is not None else output)
            journal.check()
            last_node = journal.take_held()  # the last node's row: one commit with the end
            row = journal.row(node_id=RUN_END, node_index=len(self.plan.nodes),
                              step_type=StepType.RUN_END,
                              status=CheckpointStatus.FAILED if status == RunStatus.CANCELLED
                              else CheckpointStatus(status.value),
                              counters=self.state.counters, node_output_json=payload)
            try:
                journal.store.finish_run(row, status, error.to_json() if error else None,
                                         journal.owner, last_node=last_node)
            except BaseException:
                journal.undo()
                raise
        return RunResult(status, self.execution_id, output, self._shown(self.state.data), (),
                         error)
