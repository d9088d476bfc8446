"""The console's parts on their own: reading form posts by type (validation stays
``check_values``'s), JSON trees and graphs escaped, token and key settings, and the usage
errors of ``tether serve``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tether.compiler.plan import ApprovalNode, Plan, PlanApproval, PlanInput, TaskNode
from tether.web.config import ConfigError, Role, ServeConfig, load_secret, parse_tokens
from tether.web.forms import Decision, Form, typed
from tether.web.graph import graph_svg, layers
from tether.web.present import MAX_DEPTH, json_tree

FORM = Form((PlanInput(name="approved", type="boolean", required=True),
             PlanInput(name="limit", type="integer", required=True),
             PlanInput(name="rate", type="number", required=False, default=1.5),
             PlanInput(name="tags", type="array", required=False, default=[])))


def test_posted_text_is_typed_by_the_form_and_unreadable_text_left_for_check_values() -> None:
    values = FORM.read_post({"field.limit": " 12 ", "field.rate": "2.5e1",
                             "field.tags": '["a"]', "field.approved": "true"})
    assert values == {"limit": 12, "rate": 25.0, "tags": ["a"]}  # approved: the buttons'
    assert typed("integer", "1.5") == "1.5" and typed("number", "1.5") == 1.5
    assert typed("boolean", "yes") == "yes" and typed("object", "{") == "{"
    assert FORM.read_post({"field.limit": ""}) == {}  # empty: not given


def test_buttons_set_approved_and_problems_come_back_by_field() -> None:
    answer, errors = FORM.answer(Decision.REJECT, {"limit": 3})
    assert (answer, errors) == ({"limit": 3, "approved": False}, {})
    _, errors = FORM.answer(Decision.APPROVE, {"limit": "x", "colour": "red"})
    assert errors == {"limit": ["field 'limit' must be an integer, not a string"],
                      "colour": ["unknown field 'colour' (declared: approved, limit, "
                                 "rate, tags)"]}
    _, errors = FORM.answer(None, {"limit": 1})
    assert errors == {"approved": ["missing required field 'approved'"]}
    free = Form(None)
    assert free.answer(Decision.APPROVE, {}) == ({"approved": True}, {})
    no_buttons = Form((PlanInput(name="size", type="string", required=True),))
    assert not no_buttons.decided_by_buttons
    assert no_buttons.answer(Decision.APPROVE, {"size": "L"}) == ({"size": "L"}, {})


def test_enum_fields_are_choices_and_values_outside_them_come_back_by_field() -> None:
    form = Form((PlanInput(name="approved", type="boolean", required=True),
                 PlanInput(name="tier", type="string", required=True, enum=("gold", "silver")),
                 PlanInput(name="level", type="integer", required=False, default=2,
                           enum=(1, 2, 3))))
    (tier, level) = form.fields
    assert (tier.widget, tier.choices) == ("choice", ["gold", "silver"])
    assert (level.widget, level.choices, level.shown_default) == ("choice", ["1", "2", "3"], "2")
    assert form.read_post({"field.tier": "gold", "field.level": "3"}) == {"tier": "gold",
                                                                          "level": 3}
    _, errors = form.answer(Decision.APPROVE, {"tier": "bronze", "level": True})
    assert errors == {"tier": ["field 'tier' must be one of \"gold\", \"silver\""],
                      "level": ["field 'level' must be an integer, not a boolean"]}
    _, errors = form.answer(Decision.APPROVE, {"tier": "silver", "level": 4})
    assert errors == {"level": ["field 'level' must be one of 1, 2, 3"]}
    assert form.answer(Decision.REJECT, {"tier": "silver"}) == (
        {"tier": "silver", "approved": False}, {})


def test_json_trees_escape_every_text_and_fold_what_is_long_or_deep() -> None:
    nested: object = "bottom"
    for _ in range(MAX_DEPTH + 3):
        nested = {"<k>": nested}
    html = str(json_tree({"<script>": "</script><b>", "long": "x" * 500, "deep": nested}))
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;" in html and "&lt;/script&gt;&lt;b&gt;" in html
    assert '<details class="j-long">' in html and "500 characters" in html
    assert '<pre class="j-deep">' in html


def _plan(*nodes: TaskNode | ApprovalNode) -> Plan:
    return Plan(name="p", nodes=nodes, generations=())


def test_the_graph_is_layered_coloured_and_escaped() -> None:
    plan = _plan(TaskNode(id="a", index=0, task="t"),
                 ApprovalNode(id="<b>", index=1, needs=("a",), waits_for=("a",),
                              approval=PlanApproval(reason="r")),
                 TaskNode(id="c", index=2, needs=("a",), waits_for=("a",), task="t"))
    assert layers(plan) == [["a"], ["<b>", "c"]]
    svg = str(graph_svg(plan, {"a": "completed", "<b>": "interrupted"}))
    assert 'class="node st-completed k-task" data-node="a"' in svg
    assert 'class="node st-interrupted k-approval" data-node="&lt;b&gt;"' in svg
    assert 'class="node st-pending k-task" data-node="c"' in svg
    assert "<b>" not in svg and svg.count('class="edge"') == 2


def test_tokens_name_users_with_roles_and_bad_entries_say_where() -> None:
    users = parse_tokens("ada:0123456789abcdef, bot:fedcba9876543210:viewer", "env")
    assert sorted((u.name, u.role) for u in users.values()) == \
        [("ada", Role.APPROVER), ("bot", Role.VIEWER)]
    assert "0123456789abcdef" not in repr(users)  # kept by hash only
    with pytest.raises(ConfigError, match="entry 1: expected NAME:TOKEN"):
        parse_tokens("just-a-token", "env")
    with pytest.raises(ConfigError, match="at least 16 characters"):
        parse_tokens("ada:short", "env")
    with pytest.raises(ConfigError, match="role 'admin'"):
        parse_tokens("ada:0123456789abcdef:admin", "env")


def test_settings_that_cannot_work_are_refused(tmp_path: Path) -> None:
    key = load_secret(str(tmp_path / "k" / "console.key"))
    assert load_secret(str(tmp_path / "k" / "console.key")) == key
    assert (tmp_path / "k" / "console.key").stat().st_mode & 0o777 == 0o600
    with pytest.raises(ConfigError, match="requires authentication"):
        ServeConfig(db="sqlite:///x", secret=key, host="0.0.0.0")
    with pytest.raises(ConfigError, match="at least one token"):
        ServeConfig(db="sqlite:///x", secret=key, auth="token")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="TETHER_WEBHOOK_SECRET"):
        ServeConfig(db="sqlite:///x", secret=key, notify_url="http://127.0.0.1:9/x")
    assert ServeConfig(db="sqlite:///x", secret=key, host="::1", port=81).base_url == \
        "http://[::1]:81"


@pytest.mark.parametrize(("args", "words"), [
    (["--host", "0.0.0.0"], "requires authentication"),
    (["--auth", "token"], "needs at least one token"),
    (["--notify-url", "http://127.0.0.1:9/hook"], "TETHER_WEBHOOK_SECRET"),
    (["--notify-url", "ftp://x"], "is not an http(s) URL"),
    (["--link-max-age", "soon"], "is not a duration"),
])
def test_tether_serve_usage_errors_exit_2(tmp_path: Path, args: list[str], words: str) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "tether", "serve", "--db",
                           f"sqlite:///{tmp_path / 't.db'}", "--port", "0", *args],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr
    assert "Traceback" not in done.stderr
