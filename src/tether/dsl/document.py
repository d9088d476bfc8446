"""The workflow format as pydantic models: the one definition both front ends validate against.

These models are the schema of the YAML format (``tether schema`` is generated from them) and
the content of the AST: a ``.yaml`` and a ``.flow`` file that mean the same thing produce equal
:class:`WorkflowDoc` values. Positions live beside them in a :class:`~tether.dsl.source.SourceMap`.

Validation is strict (no coercion: ``"3"`` is not an integer) and closed (unknown keys are
errors). Checks that need more context than one value (exactly one node kind, id patterns,
durations, template names) are made by :mod:`tether.dsl.validate` and the compiler, which
report them with their own codes.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from tether.dsl.document_rules import FORMAT_VERSION as FORMAT_VERSION
from tether.dsl.document_rules import INPUT_TYPES as INPUT_TYPES
from tether.dsl.document_rules import TRIGGER_RULES as TRIGGER_RULES
from tether.dsl.document_rules import (
    InputDefault,
    NodeKindOf,
    as_bare_expression,
    as_expression,
    as_list,
)
from tether.dsl.patterns import ID_PATTERN as ID_PATTERN
from tether.dsl.patterns import ID_RE as ID_RE
from tether.dsl.patterns import NODE_ID_PATTERN as NODE_ID_PATTERN
from tether.dsl.patterns import NODE_ID_RE as NODE_ID_RE
from tether.dsl.patterns import SECRET_PATTERN as SECRET_PATTERN
from tether.dsl.patterns import SECRET_RE as SECRET_RE

InputType = Literal["string", "number", "integer", "boolean", "object", "array"]
TriggerRule = Literal["all_success", "all_done", "any_success", "none_failed",
                      "none_failed_min_one_success"]
RetryStrategy = Literal["exponential", "fixed"]
OnExhausted = Literal["fail", "continue"]
Catchup = Literal["none", "latest", "all"]


Expression = Annotated[
    str, BeforeValidator(as_expression, json_schema_input_type=str | bool)
]
ListExpression = Annotated[Any, BeforeValidator(as_bare_expression)]
Count = Annotated[int, Field(ge=1)] | str
"""A positive integer, or an expression over the inputs that gives one when the run starts."""
NeedList = Annotated[
    list[str], BeforeValidator(as_list, json_schema_input_type=str | list[str])
]


class _Model(BaseModel):
    model_config = ConfigDict(
        extra="forbid", strict=True, frozen=True, populate_by_name=True
    )


class InputSpec(_Model, InputDefault):
    """A typed run parameter (also used for the fields of an approval form)."""

    type: InputType = Field(description="The JSON type of the value.")
    default: Any = Field(
        None, description="The value used when none is given; without it the input is required."
    )
    enum: list[Any] | None = Field(
        None, description="The allowed values (each of `type`); any other value is refused. "
        "A form shows them as a choice.")
    description: str | None = Field(None, description="What the input is for.")


class RetryPolicy(_Model):
    """Run a failing task again, up to ``max_attempts`` attempts in all."""

    max_attempts: int = Field(ge=1, description="Attempts in all, the first one included.")
    backoff: str | None = Field(
        None,
        description="Delay before the second attempt (a duration such as 500ms, 2s, 1m); "
        "doubled for each further one unless `strategy` is `fixed`. Default 1s.",
    )
    strategy: RetryStrategy | None = Field(
        None, description="`exponential` (default): the delay doubles after each attempt; "
        "`fixed`: every delay is `backoff`.")


class LoopSpec(_Model):
    """A bounded back-edge: after this node completes, run again from ``to`` while true."""

    to: str = Field(
        description="The node the loop starts again from (this node or an upstream one)."
    )
    while_: Expression = Field(
        alias="while", description="Run again while this expression is true."
    )
    max_iterations: Count = Field(
        description="The most times the loop body runs, the first pass included (an integer, "
        "or an expression over the inputs)."
    )
    on_exhausted: OnExhausted | None = Field(
        None,
        description="What happens when the bound is reached and the condition still holds: "
        "fail the run (default) or continue after the loop.",
    )


class ApprovalSpec(_Model):
    """A human-in-the-loop pause: the run waits, with no process alive, until resumed."""

    reason: str = Field(description="What is being approved, for example manager_approval.")
    context: Any = Field(
        None, description="What the human sees, rendered and frozen when the run pauses."
    )
    form: dict[str, InputSpec] | None = Field(
        None, description="The fields a resume must give; they become the node's output."
    )
    timeout: str | None = Field(
        None, description="How long the approval waits for a human (30m, 3d, ..., or a "
        "template over the inputs giving a duration or seconds); then `on_timeout` applies.")
    on_timeout: Literal["fail", "skip"] | dict[str, Any] | None = Field(
        None, description="What a timed-out approval does: `fail` (the default), `skip`, or "
        "an answer (a mapping checked against the form), recorded with resolver `timeout`.")


class ModelRef(_Model):
    """A model named by a mapping (the short form is ``provider:name``)."""

    provider: str = Field(description="The provider: openai or anthropic.")
    name: str = Field(description="The model's name, e.g. gpt-4.1-mini.")
    base_url: str | None = Field(
        None, description="A compatible server to call instead (vLLM, Ollama, a proxy)."
    )
    api_key_env: str | None = Field(
        None, description="The environment variable holding the API key (default: the SDK's)."
    )


def _agent_schema(schema: dict[str, Any]) -> None:
    # `max_turns` is required; the document accepts it missing so that the compiler can
    # report it with its own code (E903) instead of a generic missing key.
    schema["required"] = [*schema.get("required", []), "max_turns"]


class ToolCallLimitsSpec(_Model):
    """The bounds on an agent's tool calls (each refused beyond, failing the node)."""

    # (the bound is checked by the compiler, E913, rather than here: a clearer error)
    per_turn: int | None = Field(
        None, description="The most tool calls one reply of the model may ask for "
        "(default 64).", json_schema_extra={"minimum": 1})
    per_run: int | None = Field(
        None, description="The most tool calls the agent may ask for in one run of its "
        "node, over all its turns (default: no bound but max_turns * per_turn).",
        json_schema_extra={"minimum": 1})


class AgentSpec(_Model):
    """An LLM loop with tools, checkpointed before each model call and each tool call."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True,
                              populate_by_name=True, json_schema_extra=_agent_schema)

    model: str | ModelRef = Field(
        description="`provider:name` (openai:gpt-4.1-mini) or a mapping "
        "{provider, name, base_url, api_key_env}."
    )
    instructions: str | None = Field(None, description="The system prompt (a template).")
    prompt: str | None = Field(None, description="The first user message (a template).")
    tools: list[str] | None = Field(
        None, description="Registered tasks, or agent nodes (workers), the model may call."
    )
    max_turns: int | None = Field(None, ge=1, description="The most model calls of the loop.")
    output: dict[str, Any] | None = Field(
        None, description="A JSON Schema the final answer must match (it is parsed as JSON)."
    )
    handoffs: list[str] | None = Field(
        None, description="Agent nodes this one may hand the conversation over to."
    )
    approve_tools: list[str] | None = Field(
        None, description="Tools whose every call waits for a human's approval."
    )
    max_tool_calls: ToolCallLimitsSpec | None = Field(
        None, description="{per_turn, per_run}: the most tool calls the model may ask for in "
        "one reply (default 64) and in one run of the node."
    )


class SwitchSpec(_Model):
    """Choose among branches: the nodes of the case matching ``on`` run, the others are
    skipped."""

    on: ListExpression = Field(description="The value whose case runs (an expression).")
    cases: dict[str, NeedList] = Field(
        min_length=1, description="Case value -> the nodes that run when `on` gives it.")
    default: NeedList | None = Field(
        None, description="The nodes that run when no case matches.")


class NodeSpec(_Model, NodeKindOf):
    """One node: exactly one of ``task``, ``approval``, ``workflow``, ``agent``, ``switch``,
    ``noop``, ``fail``, ``sleep``, ``sleep_until``, and optional settings."""

    task: str | None = Field(None, description="The registered task this node calls.")
    approval: ApprovalSpec | None = Field(None, description="Pause for a human decision.")
    workflow: str | None = Field(
        None, description="Another workflow file, relative to this one, run as a sub-run."
    )
    agent: AgentSpec | None = Field(None, description="An LLM loop with tools.")
    switch: SwitchSpec | None = Field(None, description="Run the nodes of one case.")
    noop: bool | None = Field(None, description="`true`: a node that does nothing and "
                              "completes (a join point, a placeholder).")
    fail: str | None = Field(None, description="Fail the run's branch with this message "
                             "(a template).")
    sleep: str | None = Field(None, description="Wait this long (2h, 30s, or a template "
                              "giving a duration or a number of seconds): a durable timer.")
    sleep_until: str | None = Field(
        None, description="Wait until this moment (a template giving ISO 8601 text with a "
        "UTC offset, or a Unix timestamp in seconds): a durable timer.")
    title: str | None = Field(None, description="A human title, shown in graphs, progress "
                              "and `tether show`; a template, rendered when the node (or, "
                              "reading `item`, each element) starts.")
    renamed_from: str | list[str] | None = Field(
        None, description="The id (or ids) this node had before a rename: live runs moved to "
        "this plan by `tether upgrade` keep its checkpoints, counters and pending interrupts.")
    with_: dict[str, Any] | None = Field(
        None, alias="with", description="Arguments of the task, or inputs of the sub-workflow."
    )
    needs: NeedList | None = Field(None, description="Nodes that must finish before this one.")
    when: Expression | None = Field(
        None, description="Run only when this expression is true; otherwise the node is skipped."
    )
    trigger: TriggerRule | None = Field(
        None,
        description="When the node runs given its upstream nodes' outcome (default all_success).",
    )
    for_each: ListExpression = Field(
        None, description="Run the node once per element of this list (an expression or a list)."
    )
    matrix: dict[str, Any] | None = Field(
        None, description="Run the node once per combination of these lists (`item` is the "
        "combination); `include` adds combinations, `exclude` removes matching ones.")
    fail_fast: bool | None = Field(
        None, description="With `for_each` or `matrix`: `false` starts every element even "
        "after one failed (the node then fails listing the failed elements).")
    concurrency: Count | None = Field(
        None, description="How many for_each elements run at once (an integer, or an "
        "expression over the inputs)."
    )
    retry: RetryPolicy | None = Field(None, description="Run a failing task again.")
    timeout: str | None = Field(None, description="Time limit of one attempt (30s, 5m, ..., "
                                "or an expression over the inputs).")
    until: Expression | None = Field(
        None, description="Poll: call the task again (waiting `retry.backoff`) until this "
        "expression over its latest output is true, at most `retry.max_attempts` times.")
    idempotent: bool | None = Field(
        None, description="Cache the task's result so a re-executed node does not repeat it."
    )
    loop: LoopSpec | None = Field(None, description="Close a bounded loop at this node.")


class ScheduleSpec(_Model):
    """Start a run of the workflow at each tick of a cron expression (workers fire it)."""

    cron: str = Field(description="Five cron fields: minute hour day-of-month month "
                      "day-of-week, e.g. `0 3 * * *` (03:00 every day).")
    timezone: str | None = Field(None, description="The IANA time zone the expression is read "
                                 "in, e.g. Europe/Paris (default UTC).")
    inputs: dict[str, Any] | None = Field(
        None, description="The inputs of each run, checked against the workflow's inputs.")
    catchup: Catchup | None = Field(
        None, description="Ticks missed while no worker ran: `none` skips them, `latest` "
        "(default) starts the newest one, `all` starts each of them.")


Verifier = Literal["github", "stripe", "hmac"]


class WebhookSpec(_Model):
    """Start a run when a signed HTTP request arrives at ``/hooks/PATH`` of ``tether serve``."""

    verify: Verifier = Field(description="How the sender signs: `github` "
                             "(X-Hub-Signature-256), `stripe` (Stripe-Signature, with its "
                             "timestamp) or `hmac` (HMAC-SHA256 of the body in `header`).")
    secret: str = Field(description="The environment variable holding the signing secret "
                        "(read by `tether serve` per request, never stored).",
                        json_schema_extra={"pattern": SECRET_PATTERN})
    path: str | None = Field(None, description="The hook's path under /hooks/ (default: the "
                             "workflow's name).")
    inputs: dict[str, Any] | None = Field(
        None, description="The run's inputs: values, or templates reading `trigger.payload`, "
        "`trigger.headers`, `trigger.delivery`, `trigger.kind`.")
    headers: list[str] | None = Field(None, description="Request headers the templates may "
                                      "read as `trigger.headers` (lower-case names).")
    header: str | None = Field(None, description="`hmac`: the signature header (default "
                               "X-Signature; `sha256=<hex>` or bare hex).")
    timestamp_header: str | None = Field(None, description="`hmac`: a header with the Unix "
                                         "time the sender signed `TIME.BODY` at.")
    delivery_header: str | None = Field(None, description="`hmac`: a header with the "
                                        "delivery's unique id (a repeat starts no run).")
    tolerance: str | None = Field(None, description="`stripe`, `hmac` with a timestamp: how "
                                  "far the signing time may be from now (default 5m).")


class ManualSpec(_Model):
    """Who may start runs by hand (the console's Start form, ``POST
    /api/workflows/{name}/runs``)."""

    users: list[str] | None = Field(None, description="Only these console users (token or "
                                    "login names) may start it by hand; default: every "
                                    "approver and submitter.")


class TriggersSpec(_Model):
    """What starts runs of the workflow besides `tether submit` and `Runner.submit`."""

    manual: bool | ManualSpec | None = Field(
        None, description="Started by hand: the console's Start form and the API. `true` (or "
        "a mapping with `users`); once `on:` is declared, only a workflow listing `manual` "
        "may be started by hand.")
    webhook: WebhookSpec | None = Field(None, description="A signed HTTP request.")
    schedule: ScheduleSpec | None = Field(None, description="A cron schedule: the same as "
                                          "the workflow's `schedule` key.")


class ConcurrencySpec(_Model):
    """At most ``limit`` runs of the workflow with the same rendered ``key`` execute at once."""

    key: str = Field(description="The concurrency key: a template over `inputs` rendered when "
                     "a run is submitted (e.g. `{{ inputs.branch }}`), or a constant.")
    limit: int | None = Field(None, description="How many runs with the same key may run at "
                              "once, fleet-wide (default 1).")
    on_conflict: str | None = Field(
        None, description="What a run that finds its key at the limit does: `queue` (default: "
        "it waits), `cancel_running` (the older runs are cancelled at their next node "
        "boundary), `cancel_new` (it is recorded cancelled), `reject` (the submission is "
        "refused).", json_schema_extra={"enum": ["queue", "cancel_running", "cancel_new",
                                                 "reject"]})


class WorkflowDoc(_Model):
    """A tether workflow file."""

    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        frozen=True,
        populate_by_name=True,
        title="tether workflow",
        json_schema_extra={"$schema": "https://json-schema.org/draft/2020-12/schema"},
    )

    tether: int = Field(description="The format version; this release reads 1.")
    name: str = Field(description="The workflow's name.")
    description: str | None = Field(None, description="What the workflow does.")
    inputs: dict[str, InputSpec] | None = Field(
        None,
        description="Typed run parameters.",
        json_schema_extra={"propertyNames": {"pattern": ID_PATTERN}},
    )
    secrets: list[str] | None = Field(
        None,
        description="Names of the secrets templates read as `secrets.NAME`; each value comes "
        "from the environment variable of that name when a node runs, and is never stored.",
        json_schema_extra={"items": {"pattern": SECRET_PATTERN}},
    )
    schedule: ScheduleSpec | None = Field(
        None, description="Start a run at each tick of a cron expression "
        "(`tether schedules add FILE` registers it with the workers).")
    on: TriggersSpec | None = Field(
        None, description="Triggers: a `webhook` that `tether serve --workflows` listens for.")
    concurrency: ConcurrencySpec | None = Field(
        None, description="A concurrency key: at most `limit` runs with the same key run at "
        "once.")
    nodes: dict[str, NodeSpec] = Field(
        min_length=1,
        description="The nodes, by id.",
        json_schema_extra={"propertyNames": {"pattern": NODE_ID_PATTERN}},
    )
    output: Any = Field(None, description="The run's result: a value with templates.")


def dump_document(doc: WorkflowDoc) -> dict[str, Any]:
    """The document as plain data in its canonical key order, without unset keys."""
    return doc.model_dump(by_alias=True, exclude_unset=True, exclude_none=False)
