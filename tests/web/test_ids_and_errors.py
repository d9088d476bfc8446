"""Ids by unique prefix and the error families, through a real ``tether serve`` (--auth
token) over a real SQLite store: every route taking a run or checkpoint id takes a prefix of
8 or more characters (answers name the full ids), ambiguous and short prefixes are 422 with
the candidates, unknown ones 404; a fork whose patch cannot take effect is 422 and writes
nothing; and the one table mapping each family of errors to its HTTP status."""

from __future__ import annotations

import pytest
from web_support import Project, Server, approval_path

from tether import errors
from tether.web.app import STATUS_OF, status_of
from tether.web.console import BadRequest, Conflict, NotFound
from tether.web.fleet import FleetUnavailable
from tether.web.urls import run_url


def test_every_route_takes_a_unique_prefix_and_answers_with_full_ids(
        auth_server: Server, module_project: Project) -> None:
    """Run, checkpoints, approval, answer, resume-refusal and cancel by prefixes."""
    eid, cid = module_project.pause()
    # Ids minted in one millisecond differ in their last digits only (UUIDv7, counted on),
    # so the prefixes are the shortest ones no other id of the module's store shares.
    run = _unique_prefix(eid, [r.execution_id for r in module_project.store.list_runs(
        limit=10_000)])
    assert auth_server.get(f"/api{run_url(run)}").json()["execution_id"] == eid
    page = auth_server.get(f"/api{run_url(run)}/checkpoints").json()
    assert cid in [c["checkpoint_id"] for c in page["items"]]
    pause = _unique_prefix(cid, [c.checkpoint_id for c in module_project.store.list(eid)])
    shown = auth_server.get(approval_path(run, pause)).json()
    assert (shown["execution_id"], shown["checkpoint_id"]) == (eid, cid)
    by_tail = auth_server.get(approval_path(eid, cid[-12:])).json()
    assert by_tail["checkpoint_id"] == cid
    html = auth_server.get(run_url(run), headers={"Accept": "text/html"})
    assert html.status_code == 200 and eid in html.text
    refused = auth_server.post(f"/api{run_url(run)}/resume")
    assert refused.status_code == 409 and eid in refused.json()["detail"]
    answered = auth_server.post(approval_path(run, pause),
                                {"decision": "approve", "values": {"limit": 1}})
    assert answered.status_code == 200, answered.text
    [decision] = module_project.store.decisions(eid)
    assert decision.checkpoint_id == cid
    second = module_project.pause()[0]
    prefix = _unique_prefix(second, [r.execution_id for r in module_project.store.list_runs(
        limit=10_000)])
    cancelled = auth_server.post(f"/api{run_url(prefix)}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["execution_id"] == second


def _unique_prefix(full: str, ids: list[str]) -> str:
    """The shortest prefix of ``full``, of at least 8 characters, that no other of ``ids``
    starts with: the whole id when another differs from it in the last digit only."""
    others = [i for i in ids if i != full]
    return next(full[:n] for n in range(8, len(full) + 1)
                if not any(i.startswith(full[:n]) for i in others))


def test_ambiguous_short_and_unknown_prefixes(auth_server: Server,
                                              module_project: Project) -> None:
    """Two runs sharing a prefix: 422 listing both; 7 characters: 422; no match: 404."""
    made = sorted(module_project.runner().run({"amount": 250}, f"shared-web-{n}").execution_id
                  for n in (1, 2))
    ambiguous = auth_server.get(f"/api{run_url('shared-web')}")
    assert ambiguous.status_code == 422
    detail = ambiguous.json()["detail"]
    assert "execution id 'shared-web' is ambiguous: 2 match" in detail
    assert all(m in detail for m in made)
    short = auth_server.get(f"/api{run_url('shared-')}")
    assert short.status_code == 422 and "at least 8 characters" in short.json()["detail"]
    assert auth_server.get(f"/api{run_url('shared-web-3')}").status_code == 404
    page = auth_server.get(run_url("shared-web"), headers={"Accept": "text/html"})
    assert page.status_code == 422 and made[0] in page.text
    assert auth_server.get(f"/api{run_url('shared-web-1')}").json()["execution_id"] == made[0]


def test_a_fork_whose_patch_cannot_take_effect_is_422_and_writes_nothing(
        auth_server: Server, module_project: Project) -> None:
    """A patch of an input nothing left to run reads, or from a finished run: 422 naming
    the patch; no run is added."""
    eid, _ = module_project.pause()
    done = module_project.runner().resume(module_project.pause()[0],
                                          {"approved": True, "limit": 1})
    assert done.status == "completed", done.error
    before = len(module_project.store.find_runs(limit=500))
    for run, body, reason in [
        (done.execution_id, {"patch": {"inputs": {"note": "x"}}}, "every node has finished"),
        (eid, {"patch": {"inputs": {"nope": 5}}}, "'inputs.nope' is not an input"),
        (eid, {"patch": {"extra": 1}}, "'extra' is not part of a run's state"),
    ]:
        refused = auth_server.post(f"/api{run_url(run)}/fork", body)
        assert refused.status_code == 422, refused.text
        assert refused.json()["field"] == "patch" and reason in refused.json()["detail"]
    assert len(module_project.store.find_runs(limit=500)) == before


@pytest.mark.parametrize(("error", "status"), [
    (errors.RunNotFound("r"), 404),
    (errors.CheckpointNotFound("r", "c"), 404),
    (NotFound("no run"), 404),
    (errors.AlreadyResumed("r"), 409),
    (errors.LeaseLost("r"), 409),
    (errors.ExecutionExists("r"), 409),
    (Conflict("finished"), 409),
    (errors.AmbiguousId("execution id", "abcdefgh", ["a", "b"], 2), 422),
    (errors.IdTooShort("execution id", "abc", 8), 422),
    (errors.IneffectivePatch("r", "nothing reads it"), 422),
    (errors.StoreURLError("bad", parameter="port"), 422),
    (BadRequest("patch", "not an object"), 422),
    (errors.InputError(["amount is missing"]), 422),
    (errors.PlanMismatch("r", "a" * 64, "b" * 64, None), 422),
    (errors.StoreUnavailable("unreachable"), 503),
    (FleetUnavailable("no worker"), 503),
    (errors.StoreError("disk full"), 500),
    (errors.NotJSONError("the output", "a set"), 500),
    (errors.TetherError("other"), 500),
])
def test_each_family_has_its_status(error: errors.TetherError, status: int) -> None:
    """The families map to statuses in one table; a member inherits its family's."""
    assert status_of(error) == status


def test_the_table_lists_families_not_members() -> None:
    """Besides the two 503s, each entry is a family of tether.errors (or the root)."""
    families = {errors.DefinitionError, errors.UsageError, errors.NotFoundError,
                errors.RunStateError, errors.TetherError}
    rest = [cls for cls, _ in STATUS_OF if cls not in (FleetUnavailable,
                                                        errors.StoreUnavailable)]
    assert set(rest) == families and STATUS_OF[-1] == (errors.TetherError, 500)
