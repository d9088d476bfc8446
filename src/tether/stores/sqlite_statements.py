"""The SQLite store's statements, compiled (generated: do not edit).

Made by ``python -m tether.stores.sqlite_statements_gen`` (``make sqlite-statements``) from
the SQL stores' statements; read by tether.stores.sqlite. Name -> (SQL text, parameter
names in order, values the statement fixes).
"""

from __future__ import annotations

from typing import Any

STATEMENTS: dict[str, tuple[str, tuple[str, ...] | None, dict[str, Any]]] = {
    'acquire': (
        'UPDATE runs SET status=CASE WHEN (runs.status = ?) THEN runs.status ELSE ? '
        'END, updated_at=?, owner=?, lease_until=?, attempt=CASE WHEN (runs.owner = '
        '?) THEN runs.attempt ELSE runs.attempt + ? END WHERE runs.execution_id = ? '
        'AND (runs.owner IS NULL OR runs.owner = ? OR runs.lease_until < ? OR runs.owner = ?)',
        (
            'status_1',
            'param_1',
            'now',
            'owner',
            'until',
            'owner',
            'attempt_1',
            'eid',
            'owner',
            'now',
            'steal',
        ),
        {
            '%(anon_1 status)s': 'completed',
            'status_1': 'completed',
            '%(anon_2 param)s': 'running',
            'param_1': 'running',
            '%(anon_3 attempt)s': 1,
            'attempt_1': 1,
        },
    ),
    'cancel_requested_at': (
        'SELECT runs.cancel_requested_at \nFROM runs \nWHERE runs.execution_id = ?',
        ('eid',),
        {},
    ),
    'checkpoints_prefix_True': (
        'SELECT checkpoints.checkpoint_id \nFROM checkpoints \nWHERE '
        'checkpoints.execution_id = ? AND (checkpoints.checkpoint_id >= ? AND '
        'checkpoints.checkpoint_id < ? OR substr(checkpoints.checkpoint_id, '
        '(length(checkpoints.checkpoint_id) - ?) + ?) = ?) ORDER BY '
        'checkpoints.checkpoint_id\n LIMIT ? OFFSET ?',
        ('eid', 'low', 'high', 'n', 'param_1', 'low', 'limit', 'param_2'),
        {'%(anon_1 param)s': 1, 'param_1': 1, '%(anon_2 param)s': 0, 'param_2': 0},
    ),
    'claim': (
        'DELETE FROM pending_interrupts WHERE pending_interrupts.execution_id = ? AND '
        'pending_interrupts.checkpoint_id = ? RETURNING execution_id, checkpoint_id, '
        'node_id, agent_path, reason, context, created_at, due_at',
        ('eid', 'cid'),
        {},
    ),
    'create_run': (
        'INSERT INTO runs (execution_id, workflow, plan_fingerprint, status, inputs, '
        'created_at, updated_at, parent_execution_id, parent_checkpoint_id, error, '
        'owner, lease_until, attempt, queue, priority, available_at, '
        'cancel_requested_at, started_at, blocked_reason, recovery_failures, '
        'triggered_by, concurrency_key, concurrency_limit) VALUES (?, ?, ?, ?, ?, ?, '
        '?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING '
        'RETURNING execution_id',
        (
            'execution_id',
            'workflow',
            'plan_fingerprint',
            'status',
            'inputs',
            'created_at',
            'updated_at',
            'parent_execution_id',
            'parent_checkpoint_id',
            'error',
            'owner',
            'lease_until',
            'attempt',
            'queue',
            'priority',
            'available_at',
            'cancel_requested_at',
            'started_at',
            'blocked_reason',
            'recovery_failures',
            'triggered_by',
            'concurrency_key',
            'concurrency_limit',
        ),
        {},
    ),
    'decisions': (
        'SELECT decisions.execution_id, decisions.checkpoint_id, decisions.node_id, '
        'decisions.agent_path, decisions.value, decisions.resolver, '
        'decisions.comment, decisions.created_at \nFROM decisions \nWHERE '
        'decisions.execution_id = ? ORDER BY decisions.created_at, decisions.checkpoint_id',
        ('eid',),
        {},
    ),
    'delete_decision': (
        'DELETE FROM decisions WHERE decisions.execution_id = ? AND '
        'decisions.checkpoint_id = ?',
        ('eid', 'cid'),
        {},
    ),
    'due_pending': (
        'SELECT pending_interrupts.execution_id, pending_interrupts.checkpoint_id, '
        'pending_interrupts.node_id, pending_interrupts.agent_path, '
        'pending_interrupts.reason, pending_interrupts.context, '
        'pending_interrupts.created_at, pending_interrupts.due_at \nFROM '
        'pending_interrupts \nWHERE pending_interrupts.due_at <= ? ORDER BY '
        'pending_interrupts.due_at, pending_interrupts.execution_id, '
        'pending_interrupts.checkpoint_id\n LIMIT ? OFFSET ?',
        ('now', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'events': (
        'SELECT run_events.execution_id, run_events.event_id, run_events.kind, '
        'run_events.created_at, run_events.owner, run_events.actor, '
        'run_events.channel, run_events.data \nFROM run_events \nWHERE '
        'run_events.execution_id = ? AND run_events.event_id > ? ORDER BY '
        'run_events.event_id\n LIMIT ? OFFSET ?',
        ('eid', 'after', 'limit', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'fence': (
        'SELECT runs.owner \nFROM runs \nWHERE runs.execution_id = ?',
        ('eid',),
        {},
    ),
    'find_runs:000': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs ORDER BY runs.created_at DESC, '
        'runs.execution_id DESC\n LIMIT ? OFFSET ?',
        ('n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'find_runs:001': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs \nWHERE runs.created_at < ? OR '
        'runs.created_at = ? AND runs.execution_id < ? ORDER BY runs.created_at DESC, '
        'runs.execution_id DESC\n LIMIT ? OFFSET ?',
        ('at', 'at', 'eid', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'find_runs:010': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs \nWHERE runs.workflow = ? ORDER BY '
        'runs.created_at DESC, runs.execution_id DESC\n LIMIT ? OFFSET ?',
        ('workflow', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'find_runs:011': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs \nWHERE runs.workflow = ? AND '
        '(runs.created_at < ? OR runs.created_at = ? AND runs.execution_id < ?) ORDER '
        'BY runs.created_at DESC, runs.execution_id DESC\n LIMIT ? OFFSET ?',
        ('workflow', 'at', 'at', 'eid', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'find_runs:100': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs \nWHERE runs.status = ? ORDER BY '
        'runs.created_at DESC, runs.execution_id DESC\n LIMIT ? OFFSET ?',
        ('status', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'find_runs:101': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs \nWHERE runs.status = ? AND '
        '(runs.created_at < ? OR runs.created_at = ? AND runs.execution_id < ?) ORDER '
        'BY runs.created_at DESC, runs.execution_id DESC\n LIMIT ? OFFSET ?',
        ('status', 'at', 'at', 'eid', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'find_runs:110': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs \nWHERE runs.status = ? AND runs.workflow = '
        '? ORDER BY runs.created_at DESC, runs.execution_id DESC\n LIMIT ? OFFSET ?',
        ('status', 'workflow', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'find_runs:111': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs \nWHERE runs.status = ? AND runs.workflow = '
        '? AND (runs.created_at < ? OR runs.created_at = ? AND runs.execution_id < ?) '
        'ORDER BY runs.created_at DESC, runs.execution_id DESC\n LIMIT ? OFFSET ?',
        ('status', 'workflow', 'at', 'at', 'eid', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'get_idempotent': (
        'SELECT idempotency_cache.value \nFROM idempotency_cache \nWHERE '
        'idempotency_cache.execution_id = ? AND idempotency_cache."key" = ?',
        ('eid', 'key'),
        {},
    ),
    'get_plan': (
        'SELECT plans."plan" \nFROM plans \nWHERE plans.fingerprint = ?',
        ('fp',),
        {},
    ),
    'get_plan_tasks': (
        'SELECT plans.tasks \nFROM plans \nWHERE plans.fingerprint = ?',
        ('fp',),
        {},
    ),
    'get_run': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs \nWHERE runs.execution_id = ?',
        ('eid',),
        {},
    ),
    'insert_decision': (
        'INSERT INTO decisions (execution_id, checkpoint_id, node_id, agent_path, '
        'value, resolver, comment, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        (
            'execution_id',
            'checkpoint_id',
            'node_id',
            'agent_path',
            'value',
            'resolver',
            'comment',
            'created_at',
        ),
        {},
    ),
    'insert_event': (
        'INSERT INTO run_events (execution_id, event_id, kind, created_at, owner, '
        'actor, channel, data) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        ('execution_id', 'event_id', 'kind', 'created_at', 'owner', 'actor', 'channel', 'data'),
        {},
    ),
    'last_row': (
        'SELECT checkpoints.execution_id, checkpoints.checkpoint_id, '
        'checkpoints.parent_checkpoint_id, checkpoints.node_id, '
        'checkpoints.node_index, checkpoints.step_type, checkpoints.status, '
        'checkpoints.base_id, checkpoints.is_full, checkpoints.state, '
        'checkpoints.node_input, checkpoints.node_output, '
        'checkpoints.iteration_counters, checkpoints.interrupt_reason, '
        'checkpoints.interrupt_context, checkpoints.agent_path, '
        'checkpoints.created_at \nFROM checkpoints \nWHERE checkpoints.execution_id = ? '
        'ORDER BY checkpoints.checkpoint_id DESC\n LIMIT ? OFFSET ?',
        ('eid', 'param_1', 'param_2'),
        {'%(anon_1 param)s': 1, 'param_1': 1, '%(anon_2 param)s': 0, 'param_2': 0},
    ),
    'last_row_skip': (
        'SELECT checkpoints.execution_id, checkpoints.checkpoint_id, '
        'checkpoints.parent_checkpoint_id, checkpoints.node_id, '
        'checkpoints.node_index, checkpoints.step_type, checkpoints.status, '
        'checkpoints.base_id, checkpoints.is_full, checkpoints.state, '
        'checkpoints.node_input, checkpoints.node_output, '
        'checkpoints.iteration_counters, checkpoints.interrupt_reason, '
        'checkpoints.interrupt_context, checkpoints.agent_path, '
        'checkpoints.created_at \nFROM checkpoints \nWHERE checkpoints.execution_id = ? '
        'AND checkpoints.node_id != ? ORDER BY checkpoints.checkpoint_id DESC\n LIMIT '
        '? OFFSET ?',
        ('eid', 'node_id_1', 'param_1', 'param_2'),
        {
            '%(anon_1 node_id)s': 'run_end',
            'node_id_1': 'run_end',
            '%(anon_2 param)s': 1,
            'param_1': 1,
            '%(anon_3 param)s': 0,
            'param_2': 0,
        },
    ),
    'list_pending': (
        'SELECT pending_interrupts.execution_id, pending_interrupts.checkpoint_id, '
        'pending_interrupts.node_id, pending_interrupts.agent_path, '
        'pending_interrupts.reason, pending_interrupts.context, '
        'pending_interrupts.created_at, pending_interrupts.due_at \nFROM '
        'pending_interrupts ORDER BY pending_interrupts.created_at, '
        'pending_interrupts.execution_id, pending_interrupts.checkpoint_id',
        (),
        {},
    ),
    'list_pending_of': (
        'SELECT pending_interrupts.execution_id, pending_interrupts.checkpoint_id, '
        'pending_interrupts.node_id, pending_interrupts.agent_path, '
        'pending_interrupts.reason, pending_interrupts.context, '
        'pending_interrupts.created_at, pending_interrupts.due_at \nFROM '
        'pending_interrupts \nWHERE pending_interrupts.execution_id = ? ORDER BY '
        'pending_interrupts.created_at, pending_interrupts.execution_id, '
        'pending_interrupts.checkpoint_id',
        ('eid',),
        {},
    ),
    'lock_run': (
        'SELECT runs.execution_id \nFROM runs \nWHERE runs.execution_id = ?',
        ('eid',),
        {},
    ),
    'page_rows': (
        'SELECT checkpoints.execution_id, checkpoints.checkpoint_id, '
        'checkpoints.parent_checkpoint_id, checkpoints.node_id, '
        'checkpoints.node_index, checkpoints.step_type, checkpoints.status, '
        'checkpoints.base_id, checkpoints.is_full, checkpoints.state, '
        'checkpoints.node_input, checkpoints.node_output, '
        'checkpoints.iteration_counters, checkpoints.interrupt_reason, '
        'checkpoints.interrupt_context, checkpoints.agent_path, '
        'checkpoints.created_at \nFROM checkpoints \nWHERE checkpoints.execution_id = ? '
        'AND (? IS NULL OR checkpoints.checkpoint_id > ?) ORDER BY '
        'checkpoints.checkpoint_id\n LIMIT ? OFFSET ?',
        ('eid', 'after', 'after', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'pending_exists': (
        'SELECT pending_interrupts.checkpoint_id \nFROM pending_interrupts \nWHERE '
        'pending_interrupts.execution_id = ? AND pending_interrupts.agent_path = ? '
        'AND pending_interrupts.node_id = ?',
        ('eid', 'path', 'node'),
        {},
    ),
    'pending_page:False': (
        'SELECT pending_interrupts.execution_id, pending_interrupts.checkpoint_id, '
        'pending_interrupts.node_id, pending_interrupts.agent_path, '
        'pending_interrupts.reason, pending_interrupts.context, '
        'pending_interrupts.created_at, pending_interrupts.due_at, runs.workflow '
        '\nFROM pending_interrupts JOIN runs ON runs.execution_id = '
        'pending_interrupts.execution_id ORDER BY pending_interrupts.created_at DESC, '
        'pending_interrupts.execution_id DESC, pending_interrupts.checkpoint_id DESC\n '
        'LIMIT ? OFFSET ?',
        ('n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'pending_page:True': (
        'SELECT pending_interrupts.execution_id, pending_interrupts.checkpoint_id, '
        'pending_interrupts.node_id, pending_interrupts.agent_path, '
        'pending_interrupts.reason, pending_interrupts.context, '
        'pending_interrupts.created_at, pending_interrupts.due_at, runs.workflow '
        '\nFROM pending_interrupts JOIN runs ON runs.execution_id = '
        'pending_interrupts.execution_id \nWHERE pending_interrupts.created_at < ? OR '
        'pending_interrupts.created_at = ? AND pending_interrupts.execution_id < ? OR '
        'pending_interrupts.created_at = ? AND pending_interrupts.execution_id = ? '
        'AND pending_interrupts.checkpoint_id < ? ORDER BY '
        'pending_interrupts.created_at DESC, pending_interrupts.execution_id DESC, '
        'pending_interrupts.checkpoint_id DESC\n LIMIT ? OFFSET ?',
        ('at', 'at', 'eid', 'at', 'eid', 'cid', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'put': (
        'INSERT INTO checkpoints (execution_id, checkpoint_id, parent_checkpoint_id, '
        'node_id, node_index, step_type, status, base_id, is_full, state, node_input, '
        'node_output, iteration_counters, interrupt_reason, interrupt_context, '
        'agent_path, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)',
        (
            'execution_id',
            'checkpoint_id',
            'parent_checkpoint_id',
            'node_id',
            'node_index',
            'step_type',
            'status',
            'base_id',
            'is_full',
            'state',
            'node_input',
            'node_output',
            'iteration_counters',
            'interrupt_reason',
            'interrupt_context',
            'agent_path',
            'created_at',
        ),
        {},
    ),
    'put_fenced': (
        'INSERT INTO checkpoints (execution_id, checkpoint_id, parent_checkpoint_id, '
        'node_id, node_index, step_type, status, base_id, is_full, state, node_input, '
        'node_output, iteration_counters, interrupt_reason, interrupt_context, '
        'agent_path, created_at) SELECT ? AS anon_1, ? AS anon_2, ? AS anon_3, ? AS '
        'anon_4, ? AS anon_5, ? AS anon_6, ? AS anon_7, ? AS anon_8, ? AS anon_9, ? '
        'AS anon_10, ? AS anon_11, ? AS anon_12, ? AS anon_13, ? AS anon_14, ? AS '
        'anon_15, ? AS anon_16, ? AS anon_17 \nWHERE EXISTS (SELECT 1 \nFROM runs '
        '\nWHERE runs.execution_id = ? AND runs.owner = ?)',
        (
            'execution_id',
            'checkpoint_id',
            'parent_checkpoint_id',
            'node_id',
            'node_index',
            'step_type',
            'status',
            'base_id',
            'is_full',
            'state',
            'node_input',
            'node_output',
            'iteration_counters',
            'interrupt_reason',
            'interrupt_context',
            'agent_path',
            'created_at',
            'eid',
            'owner',
        ),
        {},
    ),
    'put_idempotent': (
        'INSERT INTO idempotency_cache (execution_id, "key", value, created_at) '
        'VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING',
        ('execution_id', 'key', 'value', 'created_at'),
        {},
    ),
    'record_pending': (
        'INSERT INTO pending_interrupts (execution_id, checkpoint_id, node_id, '
        'agent_path, reason, context, created_at, due_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
        (
            'execution_id',
            'checkpoint_id',
            'node_id',
            'agent_path',
            'reason',
            'context',
            'created_at',
            'due_at',
        ),
        {},
    ),
    'release': (
        'UPDATE runs SET owner=?, lease_until=? WHERE runs.execution_id = ? AND runs.owner = ?',
        ('owner', 'lease_until', 'eid', 'holder'),
        {'%(anon_1 param)s': None, 'owner': None, '%(anon_2 param)s': None, 'lease_until': None},
    ),
    'renew': (
        'UPDATE runs SET lease_until=? WHERE runs.execution_id = ? AND runs.owner = ?',
        ('until', 'eid', 'holder'),
        {},
    ),
    'row': (
        'SELECT checkpoints.execution_id, checkpoints.checkpoint_id, '
        'checkpoints.parent_checkpoint_id, checkpoints.node_id, '
        'checkpoints.node_index, checkpoints.step_type, checkpoints.status, '
        'checkpoints.base_id, checkpoints.is_full, checkpoints.state, '
        'checkpoints.node_input, checkpoints.node_output, '
        'checkpoints.iteration_counters, checkpoints.interrupt_reason, '
        'checkpoints.interrupt_context, checkpoints.agent_path, '
        'checkpoints.created_at \nFROM checkpoints \nWHERE checkpoints.execution_id = ? '
        'AND checkpoints.checkpoint_id = ?',
        ('eid', 'cid'),
        {},
    ),
    'rows': (
        'SELECT checkpoints.execution_id, checkpoints.checkpoint_id, '
        'checkpoints.parent_checkpoint_id, checkpoints.node_id, '
        'checkpoints.node_index, checkpoints.step_type, checkpoints.status, '
        'checkpoints.base_id, checkpoints.is_full, checkpoints.state, '
        'checkpoints.node_input, checkpoints.node_output, '
        'checkpoints.iteration_counters, checkpoints.interrupt_reason, '
        'checkpoints.interrupt_context, checkpoints.agent_path, '
        'checkpoints.created_at \nFROM checkpoints \nWHERE checkpoints.execution_id = ? '
        'AND (? IS NULL OR checkpoints.checkpoint_id >= ?) AND (? IS NULL OR '
        'checkpoints.checkpoint_id <= ?) ORDER BY checkpoints.checkpoint_id',
        ('eid', 'first', 'first', 'last', 'last'),
        {},
    ),
    'runs_changed:False': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs ORDER BY runs.updated_at, '
        'runs.execution_id\n LIMIT ? OFFSET ?',
        ('n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'runs_changed:True': (
        'SELECT runs.execution_id, runs.workflow, runs.plan_fingerprint, runs.status, '
        'runs.inputs, runs.created_at, runs.updated_at, runs.parent_execution_id, '
        'runs.parent_checkpoint_id, runs.error, runs.owner, runs.lease_until, '
        'runs.attempt, runs.queue, runs.priority, runs.available_at, '
        'runs.cancel_requested_at, runs.started_at, runs.blocked_reason, '
        'runs.recovery_failures, runs.triggered_by, runs.concurrency_key, '
        'runs.concurrency_limit \nFROM runs \nWHERE runs.updated_at > ? OR '
        'runs.updated_at = ? AND runs.execution_id > ? ORDER BY runs.updated_at, '
        'runs.execution_id\n LIMIT ? OFFSET ?',
        ('at', 'at', 'eid', 'n', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'runs_prefix_False': (
        'SELECT runs.execution_id \nFROM runs \nWHERE runs.execution_id >= ? ORDER BY '
        'runs.execution_id\n LIMIT ? OFFSET ?',
        ('low', 'limit', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'runs_prefix_True': (
        'SELECT runs.execution_id \nFROM runs \nWHERE runs.execution_id >= ? AND '
        'runs.execution_id < ? ORDER BY runs.execution_id\n LIMIT ? OFFSET ?',
        ('low', 'high', 'limit', 'param_1'),
        {'%(anon_1 param)s': 0, 'param_1': 0},
    ),
    'schema_version': (
        'SELECT schema_version.version \nFROM schema_version',
        (),
        {},
    ),
    'set_plan_tasks': (
        'UPDATE plans SET tasks=? WHERE plans.fingerprint = ? AND plans.tasks IS NULL',
        ('tasks', 'fp'),
        {},
    ),
    'set_run_plan': (
        'UPDATE runs SET plan_fingerprint=?, updated_at=? WHERE runs.execution_id = ?',
        ('fp', 'now', 'eid'),
        {},
    ),
    'set_status': (
        'UPDATE runs SET status=?, updated_at=?, error=?, owner=CASE WHEN (runs.owner '
        '= ?) THEN NULL ELSE runs.owner END, lease_until=CASE WHEN (runs.owner = ?) '
        'THEN NULL ELSE runs.lease_until END WHERE runs.execution_id = ?',
        ('status', 'now', 'error', 'holder', 'holder', 'eid'),
        {},
    ),
    'store_plan': (
        'INSERT INTO plans (fingerprint, "plan", created_at, tasks) VALUES (?, ?, ?, '
        '?) ON CONFLICT DO NOTHING',
        ('fingerprint', 'plan', 'created_at', 'tasks'),
        {},
    ),
}
