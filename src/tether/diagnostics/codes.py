"""The registry of diagnostic codes: one place, stable codes, documentation for ``explain``.

Codes never change meaning once published. ``E`` codes are errors, ``W`` codes are warnings
(they fail ``tether check`` only with ``--strict``). Groups: E1xx reading a file, E2xx the
document's shape, E3xx the graph, E4xx templates, E5xx value types, E6xx tasks, E7xx
sub-workflows, E80x secrets, E85x timers, E87x schedules, E88x concurrency keys, E9xx agents,
W1xx lints, C1xx changes to a workflow with live runs (`tether compat`).
"""

from __future__ import annotations

from dataclasses import dataclass

from tether.diagnostics.model import Severity


@dataclass(frozen=True)
class Code:
    """A diagnostic code with its slug, default severity, title and long explanation."""

    code: str
    slug: str
    title: str
    explanation: str

    @property
    def severity(self) -> Severity:
        return Severity.WARNING if self.code.startswith("W") else Severity.ERROR


def _code(code: str, slug: str, title: str, explanation: str) -> Code:
    return Code(code, slug, title, explanation.strip("\n"))


CODES: dict[str, Code] = {
    c.code: c
    for c in (
        _code("E100", "unreadable-file", "the file cannot be read", """
The file does not exist, is not readable, is not valid UTF-8, or has an extension tether does
not know. Workflow files are `.yaml`/`.yml` (YAML) or `.flow` (the compact syntax).
"""),
        _code("E101", "yaml-syntax", "YAML syntax error", """
The YAML parser could not read the file. The location points at the character where the
parser gave up; the real mistake is often just before it (an unclosed quote or bracket, a tab
used for indentation, a key indented one space too far).
"""),
        _code("E102", "flow-syntax", ".flow syntax error", """
The `.flow` parser met a token it did not expect. The message lists what would have been
accepted there. A statement starts at column 1 (`workflow`, `input`, `task`, `approval`,
`workflow ID = ...`, `output`); an indented line continues the statement above it.

    workflow refund
    input amount: number
    task lookup = billing.lookup_account(account: {{ inputs.account }})
        retry 3 backoff 2s
"""),
        _code("E103", "too-complex", "the document is too large or too deeply nested", """
tether refuses documents nested more than 64 levels deep, and YAML whose aliases would expand
to more than 1,000,000 values (an "alias bomb"). Flatten the document or drop the aliases.
"""),
        _code("E104", "duplicate-key", "a key appears twice in one mapping", """
YAML silently keeps the last of two equal keys; tether refuses the file instead, because the
first value is almost always meant. In `.flow`, the same clause given twice on one statement
is the same mistake.
"""),
        _code("E105", "unsupported-value", "a value that is not plain JSON data", """
Workflow values are JSON: strings, numbers, booleans, null, lists and mappings. YAML tags such
as `!!binary`, `!!set`, `!!python/object` or custom `!tags`, and the floats `.nan` and `.inf`,
have no JSON form. Quote the value to keep it as a string.
"""),
        _code("E200", "missing-key", "a required key is missing", """
Every workflow needs `tether: 1`, a `name` and `nodes`; an input needs `type`; a loop needs
`to`, `while` and `max_iterations`; a retry needs `max_attempts`; an approval needs `reason`.
"""),
        _code("E201", "unknown-key", "a key tether does not know", """
The key is not part of the format at this place. It is usually a typo: the help line suggests
the closest known key. `tether schema` prints the JSON Schema an editor can use to complete
keys as you type.
"""),
        _code("E202", "wrong-type", "a value of the wrong type", """
The value has the wrong JSON type for this key, for example a string where a mapping or an
integer is expected. YAML reads `yes`, `no`, `on` and `off` as booleans and `1.0` as a
number: quote a value to keep it a string.
"""),
        _code("E203", "invalid-value", "a value outside the allowed set or range", """
The value has the right type but is not one of the allowed values (for example a `trigger`
other than `all_success`, `all_done` or `any_success`, or an input `type` other than
`string`, `number`, `integer`, `boolean`, `object`, `array`) or is out of range.
"""),
        _code("E204", "unsupported-version", "a format version this tether does not know", """
`tether:` gives the version of the workflow format. This release reads version 1.
"""),
        _code("E205", "node-kind",
              "a node must have exactly one of task, approval, workflow, agent", """
A node is a `task` (calls a registered Python function), an `approval` (waits for a human),
a `workflow` (runs another workflow file as a sub-run) or an `agent` (an LLM loop with tools).
Give exactly one of them.
"""),
        _code("E206", "invalid-id", "an id or name that does not match ^[a-z][a-z0-9_]*$", """
Node ids and input names start with a lowercase letter and contain only lowercase letters,
digits and underscores, so templates can read them as `nodes.<id>` and `inputs.<name>`.
"""),
        _code("E207", "invalid-duration", "a duration that cannot be read", """
Durations are a number followed by a unit: `500ms`, `30s`, `5m`, `2h`, `1d`, `2w`. They must
be greater than zero and at most 366 days (a longer one is a typo, not a plan).
"""),
        _code("E208", "misplaced-key", "a key that does not apply to this kind of node", """
Some keys only make sense for some nodes: `with` for tasks and workflows, `retry`, `timeout`
and `idempotent` for tasks, `for_each` for tasks and workflows, `concurrency` only together
with `for_each`.
"""),
        _code("E209", "not-a-workflow", "the document is not a workflow mapping", """
A workflow file holds one mapping with the keys `tether`, `name`, `description`, `inputs`,
`nodes` and `output`. The file is empty, holds several YAML documents, or holds a list or a
scalar at its top level.
"""),
        _code("E210", "until-unbounded", "`until` without `retry.max_attempts`", """
`until` polls: the task is called again, waiting `retry.backoff` between calls, until the
expression over its latest output is true. The bound is `retry.max_attempts` (the first call
included); without it a condition that never holds would poll forever:

    poll:
      task: jobs.status
      until: "{{ nodes.poll.output.done }}"
      retry: {max_attempts: 20, backoff: 30s, strategy: fixed}
"""),
        _code("E211", "matrix-shape", "a `matrix` that is not lists of values", """
A matrix runs its node once per combination of its axes: each axis is a list (or an
expression giving a list), `include` is a list of combinations to add and `exclude` a list of
(partial) combinations to remove, each a mapping of axis names to values.
"""),
        _code("E212", "for-each-and-matrix", "a node with both `for_each` and `matrix`", """
A matrix is a `for_each` over combinations; a node has one or the other.
"""),
        _code("E213", "matrix-key", "an `exclude`/`include` key that is not an axis", """
Every key of a matrix's `exclude` and `include` entries must be one of its axes. An
`exclude` entry with another key matches no combination, so nothing is left out; an
`include` entry with one adds a combination whose `item` has a key no other combination has
(an `include` entry adds a whole combination; it does not extend the others). Fix the
spelling (the help suggests the nearest axis), or add the axis.
"""),
        _code("E214", "matrix-duplicate", "a value listed twice in a matrix axis", """
Each value of an axis multiplies the combinations: a value listed twice runs every one of
its combinations twice. Remove the repetition (the note points at the first occurrence).
"""),
        _code("E215", "needs-read", "a read of `needs` that cannot work", """
`needs` is one object over the statuses of the reading node's `needs`: `needs.statuses`
(each need's status, by id), `needs.all_success` (every need completed: the "all green"
join) and `needs.failed` (the ids of the needs that failed or whose own needs failed). It is
read only by a node with `needs`, only with those fields, and `needs.statuses.<id>` only for
one of its needs. One node's status or output is `nodes.<id>.status` / `nodes.<id>.output`.
"""),
        _code("E216", "matrix-exclude-value", "an `exclude` value its axis does not list", """
An `exclude` entry leaves out the combinations matching every key it gives. A value that its
axis does not list (`exclude: [{os: windows}]` where `os: [linux, macos]`) matches no
combination, so nothing is left out. Fix the value (the help lists the axis's values and the
nearest one). Axes and values given as templates are checked when the node runs.
"""),
        _code("E300", "duplicate-id", "two nodes have the same id", """
Node ids are unique within a workflow. The note points at the first definition.
"""),
        _code("E301", "unknown-need", "`needs` names a node that does not exist", """
Every id in `needs` (`after` in `.flow`) must be the id of a node in the same workflow.
"""),
        _code("E302", "cycle", "the nodes depend on each other in a cycle", """
`needs` must form a directed acyclic graph. To repeat a part of the graph, declare a bounded
loop on the node that closes it instead of a cyclic `needs`:

    critique:
      needs: [draft]
      task: text.critique
      loop: {to: draft, while: "{{ nodes.critique.output.score < 8 }}", max_iterations: 5}

The message lists every node of the cycle; the notes point at each edge.
"""),
        _code("E303", "loop-target", "`loop.to` is not upstream of its node", """
A loop runs again from `loop.to` after its node completes, so `to` must be the node itself or
one of its upstream nodes (reachable through `needs`).
"""),
        _code("E304", "loop-bound", "a loop without a positive `max_iterations`", """
Every loop has a required bound: `max_iterations` is an integer of at least 1. When the bound
is reached and `while` still holds, `on_exhausted` decides: `fail` (the default) fails the
run, `continue` goes on with the nodes after the loop.
"""),
        _code("E305", "unreachable", "a node that can never run", """
The node's guard is always false, or every path to it goes through such a node (with the
default trigger rule `all_success`, a skipped upstream node skips its dependents). Remove the
node, fix the guard, or use `trigger: all_done` to run it after skipped nodes.
"""),
        _code("E306", "loop-overlap", "two loops overlap without one containing the other", """
Loops may nest (one loop's body entirely inside another's) or be disjoint, but their bodies
may not partially overlap, and one node cannot close two loops.
"""),
        _code("E307", "duplicate-need", "the same node is listed twice in `needs`", """
Each id appears once in `needs` (`after` in `.flow`). A repeated entry is usually a copy and
paste mistake, or a different node was meant.
"""),
        _code("E308", "switch-duplicate-node", "a node listed in two cases of a switch", """
A node belongs to at most one case of a switch (or its default): the nodes of the chosen case
run, those of every other case are skipped. To run a node after several cases, make it need
the case nodes with a trigger rule such as `none_failed_min_one_success`.
"""),
        _code("E309", "switch-case-node", "a switch case names a node it cannot run", """
A case lists nodes that follow the switch: each must exist, and must not run before the
switch (it cannot be the switch itself or one of its upstream nodes). The nodes of a case
wait for the switch even if their `needs` do not name it.
"""),
        _code("E400", "template-syntax", "a template that cannot be parsed", """
Expressions are Jinja2 expressions inside `{{ ... }}`. The parser could not read this one;
the message says what it expected.
"""),
        _code("E401", "unknown-name", "a template reads a name that does not exist", """
A template can read `inputs.<name>`, `nodes.<id>.output`, `nodes.<id>.status`, `run.<field>`,
`secrets.<NAME>`, `item` (inside `for_each`) and `iteration` (inside a loop).
"""),
        _code("E402", "unknown-input", "a template reads an input that is not declared", """
Declare the input under `inputs:` (or `input` in `.flow`), or fix the name.
"""),
        _code("E403", "unknown-node", "a template reads a node that does not exist", """
`nodes.<id>` must name a node of the same workflow.
"""),
        _code("E404", "not-upstream", "a template reads a node that is not upstream", """
A node can only read the output of nodes it depends on, directly or through other nodes,
because only those are guaranteed to have run. Add the node to `needs`. Inside a loop body,
a node may read a later node of the same loop (it reads the previous iteration's value, or
nothing on the first iteration).
"""),
        _code("E405", "unknown-node-field", "a template reads a field a node does not have", """
A node exposes `nodes.<id>.output` (its result) and `nodes.<id>.status` (`completed`,
`skipped`, `failed`, or `pending`).
"""),
        _code("E406", "item-outside-for-each", "`item` is read outside `for_each`", """
`item` is the current element inside a node with `for_each` (or `matrix`); elsewhere it does
not exist. In the node's own `when` it does not exist either: `when` is decided once for the
node, before its elements run. To leave out some elements, filter the list itself
(`for_each: "{{ inputs.urls | reject('none') | list }}"`).
"""),
        _code("E407", "iteration-outside-loop", "`iteration` is read outside a loop", """
`iteration` (1 on the first pass) exists only inside a loop body and its `while` condition.
"""),
        _code("E408", "unsafe-attribute", "a template reaches for a private attribute", """
Templates run in a sandbox: attributes starting with an underscore (such as `__class__` or
`__globals__`) are never readable.
"""),
        _code("E409", "not-single-expression", "a condition must be one `{{ ... }}` expression", """
`when`, `loop.while` and an expression-valued `for_each` are a single expression, like
`{{ inputs.amount > 100 }}`. Text around it, or two expressions, would turn the value into a
string, which is always true.
"""),
        _code("E410", "unknown-filter", "a template uses a filter or test that does not exist", """
Only Jinja2's built-in filters and tests are available in templates. The help line suggests
the closest one and lists them all.
"""),
        _code("E411", "template-too-complex", "a template nested too deeply to parse safely", """
Templates may nest brackets and blocks (`{% if %}`, `{% for %}`) at most 32 levels deep, and
one expression may hold at most 100 operators. Deeper templates would exhaust the parser's
stack; no workflow needs them. Split the expression, or compute the value in a task.
"""),
        _code("E412", "unknown-function", "a template calls a function that does not exist", """
Templates may call the functions of the sandbox (`range`, `dict`, `lipsum`, `cycler`,
`joiner`, `namespace`) and apply Jinja2's filters (`value | length`, not `len(value)`). The
help line suggests the closest function or filter and lists the functions.
"""),
        _code("E413", "unknown-run-field", "a template reads a field `run` does not have", """
`run` is the run a template is rendered in: `run.id` (the execution id), `run.workflow` (the
workflow's name), `run.started_at` (ISO 8601 text), `run.attempt` (1 for the first
execution, one more per resume) and `run.parent_id` (the run a fork branched from, else
null).
"""),
        _code("E414", "setting-expression", "a numeric setting that reads more than the inputs", """
`concurrency`, `timeout` and `loop.max_iterations` may be expressions, computed when the node
starts (or the loop closes) from the inputs (and `run`): `concurrency: "{{ inputs.parallel }}"`,
`timeout: "{{ inputs.minutes * 60 }}"`. They cannot read nodes, `item` or `iteration`.
"""),
        _code("E415", "unknown-trigger-field", "a template reads a field `trigger` does not have",
              """
`trigger` is what started the run (docs/triggers.md): `trigger.kind` (`cli`, `python`,
`api`, `manual`, `webhook`, `schedule`; `unknown` for runs stored before triggers were),
`trigger.actor` (who: the OS user, the console or API user, `webhook:PATH`,
`schedule:NAME`), `trigger.payload` (a webhook's JSON body; any field below it may be read),
`trigger.headers` (the headers the webhook lists, read by any case of their names: reading
one it does not list, or any in a workflow without a webhook, is reported too),
`trigger.delivery`, `trigger.verify`, `trigger.tick` (a schedule's tick, ISO 8601 in UTC)
and `trigger.received_at`. A field a start does not have reads as null.
"""),
        _code("E500", "default-type", "an input default of the wrong type", """
An input's `default` must have the input's `type`.
"""),
        _code("E501", "argument-type", "a literal argument of the wrong type", """
A literal value passed in `with:` does not have the type the task's parameter (or the
sub-workflow's input) declares.
"""),
        _code("E502", "for-each-not-list", "`for_each` over a value that is not a list", """
`for_each` runs a node once per element of a list. An input declared `string`, `integer`,
`number`, `boolean` or `object` (or a literal that is not a list) fails at run time; declare
the input `array`, or give the list itself.
"""),
        _code("E503", "element-key", "`item` read with a key the elements do not have", """
Where the elements of `for_each` are known (a literal list, a matrix's axes, a task's
annotated return type with `--tasks`), `item.<key>` must be a key some element has. In a
literal list whose elements have optional keys, read an optional key with a default:
`item.name | default(item.python)`, `item.get('name', 'x')` or `'name' in item` (W108 warns of
a bare read).
"""),
        _code("E600", "unknown-task", "the task is not registered", """
With task modules given (`--tasks MODULE` or `[tool.tether] tasks = [...]` in
`pyproject.toml`), every `task:` must name a function registered with `@tether.task`.
"""),
        _code("E601", "unknown-argument", "an argument the task does not accept", """
The task's function has no parameter of this name (and no `**kwargs`).
"""),
        _code("E602", "missing-argument", "a required argument is missing", """
The task's function has a parameter without a default that `with:` does not give.
"""),
        _code("E603", "task-module", "a task module cannot be imported", """
A module named with `--tasks` or in `[tool.tether] tasks` failed to import. The message
carries the exception the import raised.
"""),
        _code("E604", "unknown-output-field", "a read of a field the task's output lacks", """
With task modules given, a task whose return type is annotated with a `TypedDict`, a
dataclass or a pydantic model has a known output: `nodes.<id>.output.<field>` must name one
of its fields (the help line suggests the closest).
"""),
        _code("E700", "workflow-not-found", "the sub-workflow file does not exist", """
`workflow:` takes a path relative to the file that references it.
"""),
        _code("E701", "workflow-invalid", "the sub-workflow file has errors", """
The referenced file does not compile; the notes show its own diagnostics.
"""),
        _code("E702", "workflow-recursion", "workflow files include each other in a cycle", """
A workflow cannot (directly or indirectly) run itself as a sub-workflow.
"""),
        _code("E703", "unknown-workflow-input", "an input the sub-workflow does not declare", """
`with:` on a `workflow:` node gives the sub-workflow's inputs; each name must be declared in
the sub-workflow's `inputs`.
"""),
        _code("E704", "missing-workflow-input", "a required sub-workflow input is missing", """
The sub-workflow declares an input without a default that `with:` does not give.
"""),
        _code("E705", "workflow-limit", "sub-workflows nest too deeply or expand too far", """
Each `workflow:` node embeds its file's plan, once per node, so that a run never needs its
source files again. A few small files that each run the next several times can describe
millions of nodes; tether refuses a workflow with more than 100,000 nodes once its
sub-workflows are embedded, and sub-workflows nested more than 32 levels deep. The notes show
the chain of files that leads to the limit. Use `for_each` on one node for a large fan-out
instead of many nodes, and flatten deep chains of files.
"""),
        _code("E706", "workflow-outside-project", "a sub-workflow path that leaves the project", """
A `workflow:` path must resolve, symlinks followed, inside the directory of the workflow that
names it or inside the project root: `root` under `[tool.tether]` in the nearest
`pyproject.toml` (relative to that file), by default the directory holding `pyproject.toml`;
without one, only the workflow's own directory. A path elsewhere (`../../elsewhere/x.yaml`,
an absolute path, a symlink pointing out) is refused and the file is not read, so checking a
pull request never prints files of the machine that checks it.
"""),
        _code("E707", "not-a-workflow-file", "`workflow:` names a file that is not a workflow", """
The file parsed, but it is not a workflow (no `tether:` key at its top, or not a mapping).
Nothing it holds is shown: it may be a configuration or credentials file.
"""),
        _code("E800", "invalid-secret", "a secret name that is not valid, or declared twice", """
`secrets:` lists the names of the secrets a workflow reads. A name is written like an
environment variable, because that is where its value comes from: upper-case letters, digits
and underscores, not starting with a digit (`STRIPE_KEY`, `GITHUB_TOKEN`). Each name is
declared once.
"""),
        _code("E801", "undeclared-secret", "a template reads a secret that is not declared", """
A template reads a secret as `secrets.NAME`, and only the names listed under `secrets:`
(`secrets NAME, ...` in `.flow`). Declare it, or fix the name; a template cannot read all of
`secrets` at once or choose one by a computed name.
"""),
        _code("E802", "secret-stored", "a secret read into a value the run stores and shows", """
A secret's value is read from the environment when a node runs and is never written to the
store. An approval's `reason` and `context` are frozen into the checkpoint and shown to the
people who answer; the workflow's `output` is stored and printed; a sub-workflow's inputs are
stored with its run. A secret read in any of them would leak, so tether refuses it. Pass the
secret to the task that needs it (`with:`), or declare it in the sub-workflow and read it
there.
"""),
        _code("E803", "secret-in-data", "a secret read into a value that becomes run data", """
A switch's `on` value is its output, a fail node's message is its error, and the items of
`for_each` and `matrix` are the elements' inputs and outputs, and a templated title (of the
run or of a node) is shown wherever the run is listed: all of them are stored with the run and
shown by `tether show`, the console and the API. A secret read into one of them would
be stored in clear (masking only catches the strings tether knows), so tether refuses it.
Pass the secret to the task that needs it (`with:`): a task's input that reads a secret is
stored as a placeholder (`<secret: {{ secrets.KEY }}>`) and rendered again from the
environment every time the node runs. A condition (`when`, `until`, `loop.while`) may read a
secret: it yields only a decision.
"""),
        _code("E850", "invalid-sleep", "a `sleep` that is not a duration", """
`sleep:` waits a duration, written like every duration of the language (500ms, 30s, 5m, 2h,
7d, 2w; at most 366 days), or a template giving one (a duration text, or a number of
seconds), checked when the node runs.
"""),
        _code("E851", "invalid-sleep-until", "a `sleep_until` that is not a timestamp", """
`sleep_until:` waits until a moment: ISO 8601 text with a UTC offset
(`2026-12-03T10:00:00+01:00`, `...Z`), a Unix timestamp in seconds, or a template giving one.
Text without an offset is refused: the workers of a fleet may sit in different time zones,
and a timer must mean one moment on all of them.
"""),
        _code("E852", "invalid-approval-timeout", "an approval `timeout` that is not a duration",
              """
`approval.timeout` is how long the approval waits for a human before `on_timeout` applies:
a duration such as 30m, 3d or 2w (at most 366 days).
"""),
        _code("E853", "on-timeout-without-timeout", "`on_timeout` without `timeout`", """
`approval.on_timeout` says what happens when the approval times out; without
`approval.timeout` it never does. Add the timeout, or remove `on_timeout`.
"""),
        _code("E854", "on-timeout-answer", "an `on_timeout` answer that does not match the form",
              """
`on_timeout` given as a mapping is the answer the approval gets when it times out (recorded
as a decision with resolver `timeout`). It must match the approval's `form`: every field
without a default, no other field, each of its type, as a human's answer would.
"""),
        _code("E870", "invalid-cron", "a schedule's cron expression cannot be read", """
`schedule.cron` is five fields separated by spaces: minute (0-59), hour (0-23), day of the
month (1-31), month (1-12 or JAN-DEC) and day of the week (0-7 or SUN-SAT, 0 and 7 are
Sunday). Each field is `*`, a number, a range `1-5`, a step `*/15` or `1-30/5`, or a list of
them `1,15`. The message names the field that could not be read. Examples: `0 3 * * *`
(03:00 every day), `*/15 * * * MON-FRI` (every quarter hour on weekdays).
"""),
        _code("E871", "unknown-timezone", "a schedule's time zone is not an IANA time zone", """
`schedule.timezone` names a zone of the IANA time zone database, spelt as it is there:
`Europe/Paris`, `America/New_York`, `UTC` (names are case-sensitive). The help line suggests
the closest name.
"""),
        _code("E872", "schedule-inputs",
              "a schedule's inputs do not match the workflow's inputs", """
Each run a schedule starts gets `schedule.inputs`, so they are checked as the inputs of
`tether run` are: every required input is given, no undeclared input is given, each value is
of its input's type and, where the input lists an `enum`, one of its values. Templates are not
allowed in schedule inputs (nothing is there to render them against): give the values.
"""),
        _code("E880", "concurrency-key", "a concurrency key cannot be rendered from the inputs", """
`concurrency.key` is rendered when a run is submitted (or started in place), before any node
runs, so the only name it may read is `inputs`, and only inputs the workflow declares. A
constant key (`deploy`) makes one group of every run of the workflow. A key that renders to
null or to an empty string leaves that run without a key (no limit applies to it).

    concurrency:
      key: "{{ inputs.branch }}"
      limit: 1
      on_conflict: cancel_running
"""),
        _code("E881", "concurrency-limit", "a concurrency limit is not a positive integer", """
`concurrency.limit` is how many runs with the same key may run at once across the fleet: an
integer of at least 1 (default 1).
"""),
        _code("E882", "concurrency-policy", "an unknown concurrency conflict policy", """
`concurrency.on_conflict` says what a run that finds `limit` runs of its key does:
`queue` (the default: it waits, queued, and starts when one of them ends), `cancel_running`
(the older runs of the key are cancelled at their next node boundary and the new one starts
when they stop), `cancel_new` (the new run is recorded cancelled, with the reason in its
history) or `reject` (the submission is refused: `ConcurrencyLimitReached`, exit code 6, HTTP
409).
"""),
        _code("E900", "unknown-tool", "an agent's tool is not a registered task or an agent", """
With task modules given, every name under an agent's `tools:` must be a task registered
with `@tether.task`, or the id of another agent node (a worker, which the agent asks with one
string argument, `request`). The help line suggests the closest name.
"""),
        _code("E901", "tool-schema", "a tool whose parameters have no JSON Schema", """
A model is told each tool's parameters as JSON Schema, made from the task function's type
hints (pydantic). Every parameter needs an annotation with a JSON form: `str`, `int`,
`float`, `bool`, `list[...]`, `dict[str, ...]`, `Optional`, `Literal`, enums, pydantic models,
dataclasses or TypedDicts. `*args`, `**kwargs` and positional-only parameters cannot be
passed by name and are refused.
"""),
        _code("E902", "unknown-provider", "a model of a provider tether does not know", """
A model is `openai:<model>` or `anthropic:<model>`, or a mapping `{provider, name, base_url,
api_key_env}`. Servers compatible with a provider's API (vLLM, Ollama, proxies) are used
through that provider with `base_url`.
"""),
        _code("E903", "missing-max-turns", "an agent without `max_turns`", """
`max_turns` is required: it bounds the model calls of the loop (each call costs time and
money, and a model can keep calling tools for ever). When it is reached the node fails;
resuming the failed run gives the agent `max_turns` more calls.
"""),
        _code("E904", "invalid-output-schema", "an agent's `output` is not a valid JSON Schema", """
`output` is a JSON Schema (checked against its draft's metaschema). The final answer is
parsed as JSON and validated against it; when it does not match, the model is asked again
with the validation error, within `max_turns`.
"""),
        _code("E905", "tool-name-clash", "two tools are declared to the model under one name", """
Providers accept only letters, digits, `_` and `-` in tool names, so every other character
becomes `_` (`billing.lookup` is declared as `billing_lookup`); a handoff to `x` is the tool
`transfer_to_x`. Two names of one agent that become the same declared name could not be told
apart when the model calls one. Rename one of them.
"""),
        _code("E906", "agent-cycle", "agents call each other in a cycle", """
An agent may list other agents under `tools` (workers) and `handoffs`. Those calls must not
lead back to the agent: a worker asking its supervisor, or two agents handing the
conversation back and forth, would recurse without end. The notes show each call.
"""),
        _code("E907", "provider-unavailable", "the provider's SDK is not installed", """
Agents call models through the providers' official SDKs, installed as extras:
`pip install 'tether[openai]'` or `pip install 'tether[anthropic]'`. A workflow with an agent
needs the extra of its provider wherever it is checked or run.
"""),
        _code("E908", "unknown-handoff", "a handoff target that is not an agent node", """
`handoffs:` lists agent nodes of the same workflow. The model is offered each as a tool named
`transfer_to_<node>`; calling it hands the conversation over to that agent.
"""),
        _code("E909", "missing-prompt", "an agent node without `prompt`", """
An agent that runs as a node of the graph starts its conversation with `prompt` (a template,
e.g. `"{{ inputs.request }}"`). Only agents that run when another agent calls them (workers,
handoff targets) need none.
"""),
        _code("E910", "called-agent", "a node-like use of an agent that runs only when called", """
An agent named under another agent's `tools` or `handoffs` runs only when that agent calls it;
it is not a node of the graph. So it cannot have `needs`, `when`, `trigger` or `loop`, other
nodes cannot need it, and templates cannot read its output. Use the agent that calls it.
"""),
        _code("E911", "unknown-approved-tool", "`approve_tools` names a tool the agent lacks", """
Every name under `approve_tools` must also be listed under `tools`: each call of it pauses
the run for a human's approval before it runs.
"""),
        _code("E912", "invalid-model", "a model reference that cannot be used", """
A model is `provider:name` (`openai:gpt-4.1-mini`) or a mapping with `provider` and `name`,
and optionally `base_url` (an `http://` or `https://` URL) and `api_key_env` (an environment
variable name).
"""),
        _code("E913", "tool-call-limit-out-of-range", "a `max_tool_calls` bound below 1", """
`max_tool_calls: {per_turn: N, per_run: M}` bounds the tool calls of an agent: `per_turn`
the calls one reply of the model may ask for (default 64), `per_run` those of all its turns
in one run of the node (no bound by default). Each is a whole number of at least 1. A model
that asks for more fails the node with `ToolCallLimit`, before any of that reply's calls run.
"""),
        _code("W100", "retry-not-idempotent", "a retried task is not marked idempotent", """
A retried task runs again after a failure, so a side effect it committed before failing may
happen twice. Mark the node `idempotent: true` (or wrap the side effect with
`@tether.idempotent`); write `idempotent: false` to say the repetition is safe. A poll
(`until`) is not reported: its `retry` bounds the calls (E210 requires it), and calling the
task again is what polling means.
"""),
        _code("W101", "unused-input", "an input no template reads", """
The input is declared but never read. Remove it, or read it where it was meant to be used.
"""),
        _code("W102", "unused-secret", "a declared secret no template reads", """
The secret is declared but never read. Remove it, or read it where it was meant to be used
(`{{ secrets.NAME }}`).
"""),
        _code("W103", "constant-condition", "a condition that is always true", """
`when: "{{ true }}"`, `when: "{{ 'false' }}"` (a non-empty string is true) or
`when: "{{ x or true }}"` decide nothing: the node always runs. Remove the guard or fix it.
(An always false guard is E305: the node never runs.)
"""),
        _code("W104", "switch-without-default", "a switch without `default`", """
When the value of `on` matches no case, none of the switch's nodes run and nothing says so.
Add `default: [...]`, for example a `fail:` node naming the unexpected value, or write
`default: null` (`.flow`: `default null`) to say that no default is needed.
"""),
        _code("W105", "maybe-skipped-read", "a read of a node that may be skipped", """
The node read has a `when` guard (or belongs to a case of a switch), so it may be skipped;
the reader's trigger rule (`all_done`, `any_success`, `none_failed`, ...) runs it anyway, and
the value read is then null. Test `nodes.<id>.status` in the same template, or give a
default (`nodes.<id>.output or {}`).
"""),
        _code("W106", "approval-unread", "an approval whose answer nothing reads", """
The answer of an approval is its output. When the approval has a `form` and no template reads
`nodes.<id>.output`, the run goes on the same way whatever the person answered: a rejection
would change nothing. (An approval without a form is a plain gate: resuming it is the
decision.) Guard
the next step with it (`when: "{{ nodes.<id>.output.approved }}"`) or pass it on.
"""),
        _code("E230", "webhook-path", "a webhook's path is not a plain path segment", """
`on.webhook.path` is the hook's address under `tether serve`: `/hooks/PATH`. It is one path
segment of letters, digits, `.`, `_` and `-` (at most 100 characters), starting with a letter
or digit. Left out, it is the workflow's name.
"""),
        _code("E231", "webhook-secret",
              "a webhook's secret is not an environment variable name", """
`on.webhook.secret` names the environment variable that holds the signing secret (upper-case
letters, digits and `_`, e.g. `GITHUB_WEBHOOK_SECRET`). `tether serve` reads it for each
request; the secret itself never belongs in the file, the plan or the store.
"""),
        _code("E232", "webhook-header", "a webhook names something that is not an HTTP header", """
The names under `on.webhook.headers`, and the `hmac` scheme's `header`, `timestamp_header`
and `delivery_header`, are HTTP header names: letters, digits and `-`.
"""),
        _code("E233", "webhook-option",
              "a webhook option that does not apply or cannot be read", """
`header`, `timestamp_header` and `delivery_header` belong to `verify: hmac` (GitHub and
Stripe fix their own headers). `tolerance` is a duration (`5m`) and needs a signed timestamp:
`verify: stripe`, or `hmac` with `timestamp_header`; GitHub signs none (its
`X-GitHub-Delivery` id is what stops a replay).
"""),
        _code("E234", "webhook-inputs", "a webhook's inputs do not match the workflow's inputs", """
Each run a webhook starts gets the inputs `on.webhook.inputs` maps from the request, so every
required input must be given there and no undeclared input may be; each value is checked
against its input's type when a request arrives (a request that does not fit is answered 422).
"""),
        _code("E235", "webhook-template",
              "a webhook input template reads something other than `trigger`", """
The inputs of a webhook are rendered by `tether serve` when the request arrives, before the run
exists: the only name is `trigger` (`trigger.payload`, the JSON body; `trigger.headers`, the
headers listed under `headers`; `trigger.delivery`; `trigger.kind`). `inputs`, `nodes` and
`secrets` do not exist yet; a template that cannot be read is reported here too.
"""),
        _code("E420", "template-include", "a template that includes another template", """
Templates are text of the workflow file, rendered by a sandbox that has no files to read:
`{% include %}` would fail when the node runs. Write the text where it is used, or build it in
a task.
"""),
        _code("E421", "template-import", "a template that imports macros from another template", """
`{% import %}` and `{% from ... import %}` read another template, which the sandbox does not
have: they would fail when the node runs. Define the macro in the same template, or compute
the value in a task.
"""),
        _code("E422", "template-extends", "a template that extends another template", """
`{% extends %}` reads a base template, which the sandbox does not have: it would fail when the
node runs. Write the whole text in the template.
"""),
        _code("E423", "attr-filter", "the `attr` filter, which the sandbox refuses", """
`x|attr(name)` reads an attribute whose name may be computed, where no check can see which
one; the sandbox refuses the filter. Read attributes with `.name` or `['name']`.
"""),
        _code("E424", "attr-private", "`attr` naming a private attribute", """
`x|attr('__class__')` (any name starting with an underscore) reaches for what the sandbox
never gives a template, as `x.__class__` does (E408).
"""),
        _code("W108", "optional-element-key", "a bare read of a key only some elements have", """
The elements of a literal `for_each` list are mappings, and only some of them have the key
read: the others fail at run time (an undefined value). Give a default
(`item.name | default(item.python)`, `item.get('name', 'x')`) or test for it
(`'name' in item`, `item.name is defined`); such a template is not reported.
"""),
        _code("C100", "renamed-from-existing", "`renamed_from` names an id that still exists", """
`renamed_from:` lists the ids a node had before a rename, so that `tether upgrade` moves a
live run's checkpoints, counters and pending interrupts of the old id to this node. An old id
that is still the id of a node (or this node's own id) would give that progress to two nodes.
Remove it from `renamed_from`, or rename the other node.
"""),
        _code("C101", "renamed-from-twice", "two nodes claim to be renamed from one id", """
A node's old id can move to one node only. Keep the old id in the `renamed_from` of the node
that continues the old one's work; the other node starts afresh in upgraded runs.
"""),
        _code("C110", "started-node-changed", "a node live runs started is defined differently", """
`tether compat`: some live runs already started (or finished) this node, and the new file
defines it differently (its task, arguments' templates, kind, retry, timeout, guard, loop or
for_each). Their checkpoints were made by the old definition, so those runs stay pinned to
their plan (`tether upgrade` leaves them) and finish on it. Change a node no run has started,
add a new node instead, or let the runs finish before the deploy.
"""),
        _code("C111", "started-node-removed", "a node live runs started is gone", """
`tether compat`: some live runs started this node and the new file has no node of that id. A
rename keeps the runs movable only when the new node says `renamed_from: OLD_ID`.
"""),
        _code("C112", "approval-form-changed", "a pending approval's form changed", """
`tether compat`: runs are paused at this approval and the new file changed its `form` or its
frozen `context`: the answer a person is about to give (or gave) was asked with the old form
and may not fit the new one. The runs stay pinned; answer them first, or keep the form.
"""),
        _code("C113", "agent-changed-mid-loop", "an agent node mid-loop changed", """
`tether compat`: runs are inside this agent's loop (turns taken, tool calls pending) and the
new file changed its model, tools, instructions or output schema: the conversation so far was
held with the old definition. The runs stay pinned.
"""),
        _code("C114", "new-required-input", "a new required input without a default", """
`tether compat`: the new file declares an input the live runs were not started with, required
and without a default: those runs could not render a template reading it. Give it a default
(or make it optional) to let them move.
"""),
        _code("C115", "output-shape-changed", "an output a later node reads changed shape", """
`tether compat`: a node some runs finished now declares another output shape (its task's
return annotation or an agent's output schema), and a node that has not run yet reads it: the
reader would get the old shape. The runs stay pinned.
"""),
        _code("C116", "loop-progress-unfit",
              "loop or for_each progress the new plan cannot hold", """
`tether compat`: runs are inside a loop or a for_each whose structure changed (the loop's body,
its bound, the node carrying it, the for_each source): their counters or the elements already
done would mean something else in the new plan. The runs stay pinned.
"""),
        _code("C117", "subworkflow-changed", "a started sub-workflow's plan changed", """
`tether compat`: runs started this sub-workflow node and the sub-workflow's own plan changed
in a way its started nodes cannot follow (checked recursively, with the same rules). The runs
stay pinned.
"""),
        _code("E236", "two-schedules", "a workflow with both `schedule` and `on.schedule`", """
`on: {schedule: ...}` and the top-level `schedule:` are the same trigger written two ways; a
workflow has at most one schedule. Keep one of them.
"""),
    )
}


def lookup(code: str) -> Code | None:
    """The registered code, accepting any case and the slug (``E302`` or ``cycle``)."""
    wanted = code.strip()
    if wanted.upper() in CODES:
        return CODES[wanted.upper()]
    return next((c for c in CODES.values() if c.slug == wanted.lower()), None)
