"""The core schema of the plan (generated: do not edit).

Made by ``python -m tether.compiler.plan_schema_gen`` (``make plan-schema``) from
tether.compiler.plan; read by tether.compiler.plan_light.
"""

from __future__ import annotations

from typing import Any

from tether.compiler.plan_light import (
    AgentNode,
    ApprovalNode,
    FailNode,
    NoopNode,
    Plan,
    PlanAgent,
    PlanApproval,
    PlanConcurrency,
    PlanInput,
    PlanLoop,
    PlanManual,
    PlanModelRef,
    PlanRetry,
    PlanSchedule,
    PlanSubworkflow,
    PlanSwitch,
    PlanTool,
    PlanToolCalls,
    PlanWebhook,
    SleepNode,
    SleepUntilNode,
    SourceRef,
    SwitchNode,
    TaskNode,
    WorkflowNode,
    made,
)
from tether.compiler.plan_rules import (
    read_format_1,
    without_absent_enum,
    without_default_limits,
    without_default_strategy,
    without_empty_secrets,
    without_timeout,
    write_format_1,
)
from tether.kinds import NodeKind

PYDANTIC_VERSION = '2.14.4'
PYDANTIC_CORE_VERSION = '2.50.5'

_definition_ref: dict[str, Any] = {'type': 'definition-ref', 'schema_ref': 'Plan'}

_defaulted_int: dict[str, Any] = {'type': 'default', 'schema': {'type': 'int'}, 'default': 1}

_field_defaulted_int: dict[str, Any] = {'type': 'model-field', 'schema': _defaulted_int}

_field_str: dict[str, Any] = {'type': 'model-field', 'schema': {'type': 'str'}}

_nullable_str: dict[str, Any] = {'type': 'nullable', 'schema': {'type': 'str'}}

_optional_str: dict[str, Any] = {'type': 'default', 'schema': _nullable_str, 'default': None}

_field_optional_str: dict[str, Any] = {'type': 'model-field', 'schema': _optional_str}

_definition_ref_2: dict[str, Any] = {'type': 'definition-ref', 'schema_ref': 'PlanInput'}

_tuple: dict[str, Any] = {
    'type': 'tuple',
    'items_schema': [_definition_ref_2],
    'variadic_item_index': 0,
}

_tuple_2: dict[str, Any] = {
    'type': 'tuple',
    'items_schema': [{'type': 'str'}],
    'variadic_item_index': 0,
}

_defaulted_tuple: dict[str, Any] = {'type': 'default', 'schema': _tuple_2, 'default': ()}

_field_defaulted_tuple: dict[str, Any] = {'type': 'model-field', 'schema': _defaulted_tuple}

_dict_of_any: dict[str, Any] = {
    'type': 'dict',
    'keys_schema': {'type': 'str'},
    'values_schema': {'type': 'any'},
}

_defaulted_dict_of_any: dict[str, Any] = {
    'type': 'default',
    'schema': _dict_of_any,
    'default_factory': dict,
    'default_factory_takes_data': False,
}

_field_defaulted_dict_of_any: dict[str, Any] = {
    'type': 'model-field',
    'schema': _defaulted_dict_of_any,
}

_PlanSchedule: dict[str, Any] = {
    'type': 'model',
    'cls': PlanSchedule,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'cron': _field_str,
            'timezone': {
                'type': 'model-field',
                'schema': {'type': 'default', 'schema': {'type': 'str'}, 'default': 'UTC'},
            },
            'inputs': _field_defaulted_dict_of_any,
            'catchup': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'literal', 'expected': ['none', 'latest', 'all']},
                    'default': 'latest',
                },
            },
        },
        'model_name': 'PlanSchedule',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanSchedule',
    },
    'ref': 'PlanSchedule',
}

_PlanWebhook: dict[str, Any] = {
    'type': 'model',
    'cls': PlanWebhook,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'path': _field_str,
            'verify': {
                'type': 'model-field',
                'schema': {'type': 'literal', 'expected': ['github', 'stripe', 'hmac']},
            },
            'secret': _field_str,
            'inputs': _field_defaulted_dict_of_any,
            'headers': _field_defaulted_tuple,
            'header': {
                'type': 'model-field',
                'schema': {'type': 'default', 'schema': {'type': 'str'}, 'default': 'x-signature'},
            },
            'timestamp_header': _field_optional_str,
            'delivery_header': _field_optional_str,
            'tolerance': {
                'type': 'model-field',
                'schema': {'type': 'default', 'schema': {'type': 'float'}, 'default': 300.0},
            },
        },
        'model_name': 'PlanWebhook',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanWebhook',
    },
    'ref': 'PlanWebhook',
}

_defaulted_bool: dict[str, Any] = {'type': 'default', 'schema': {'type': 'bool'}, 'default': True}

_field_defaulted_bool: dict[str, Any] = {'type': 'model-field', 'schema': _defaulted_bool}

_PlanManual: dict[str, Any] = {
    'type': 'model',
    'cls': PlanManual,
    'schema': {
        'type': 'model-fields',
        'fields': {'allowed': _field_defaulted_bool, 'users': _field_defaulted_tuple},
        'model_name': 'PlanManual',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanManual',
    },
    'ref': 'PlanManual',
}

_PlanConcurrency: dict[str, Any] = {
    'type': 'model',
    'cls': PlanConcurrency,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'key': _field_str,
            'limit': _field_defaulted_int,
            'on_conflict': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'literal',
                        'expected': ['queue', 'cancel_running', 'cancel_new', 'reject'],
                    },
                    'default': 'queue',
                },
            },
        },
        'model_name': 'PlanConcurrency',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanConcurrency',
    },
    'ref': 'PlanConcurrency',
}

_field_int: dict[str, Any] = {'type': 'model-field', 'schema': {'type': 'int'}}

_literal_all_success_all_done: dict[str, Any] = {
    'type': 'literal',
    'expected': [
        'all_success',
        'all_done',
        'any_success',
        'none_failed',
        'none_failed_min_one_success',
    ],
}

_defaulted_literal_all_success_all_done: dict[str, Any] = {
    'type': 'default',
    'schema': _literal_all_success_all_done,
    'default': 'all_success',
}

_field_defaulted_literal_all_success_all_done: dict[str, Any] = {
    'type': 'model-field',
    'schema': _defaulted_literal_all_success_all_done,
}

_definition_ref_3: dict[str, Any] = {'type': 'definition-ref', 'schema_ref': 'PlanLoop'}

_nullable_definition_ref: dict[str, Any] = {'type': 'nullable', 'schema': _definition_ref_3}

_optional_definition_ref: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_definition_ref,
    'default': None,
}

_field_optional_definition_ref: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_definition_ref,
}

_defaulted_int_2: dict[str, Any] = {'type': 'default', 'schema': {'type': 'int'}, 'default': 0}

_field_defaulted_int_2: dict[str, Any] = {'type': 'model-field', 'schema': _defaulted_int_2}

_field_defaulted_dict_of_any_2: dict[str, Any] = {
    'type': 'model-field',
    'schema': _defaulted_dict_of_any,
    'validation_alias': 'with',
    'serialization_alias': 'with',
}

_defaulted_any: dict[str, Any] = {'type': 'default', 'schema': {'type': 'any'}, 'default': None}

_field_defaulted_any: dict[str, Any] = {'type': 'model-field', 'schema': _defaulted_any}

_int_or_str: dict[str, Any] = {'type': 'union', 'choices': [{'type': 'int'}, {'type': 'str'}]}

_nullable_int_or_str: dict[str, Any] = {'type': 'nullable', 'schema': _int_or_str}

_optional_int_or_str: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_int_or_str,
    'default': None,
}

_field_optional_int_or_str: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_int_or_str,
}

_definition_ref_4: dict[str, Any] = {'type': 'definition-ref', 'schema_ref': 'PlanRetry'}

_nullable_definition_ref_2: dict[str, Any] = {'type': 'nullable', 'schema': _definition_ref_4}

_optional_definition_ref_2: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_definition_ref_2,
    'default': None,
}

_field_optional_definition_ref_2: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_definition_ref_2,
}

_float_or_str: dict[str, Any] = {'type': 'union', 'choices': [{'type': 'float'}, {'type': 'str'}]}

_nullable_float_or_str: dict[str, Any] = {'type': 'nullable', 'schema': _float_or_str}

_optional_float_or_str: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_float_or_str,
    'default': None,
}

_field_optional_float_or_str: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_float_or_str,
}

_function_wrap: dict[str, Any] = {
    'type': 'function-wrap',
    'function': write_format_1,
    'info_arg': True,
    'return_schema': _dict_of_any,
}

_TaskNode: dict[str, Any] = {
    'type': 'model',
    'cls': TaskNode,
    'schema': {
        'type': 'function-before',
        'function': {'type': 'no-info', 'function': read_format_1(NodeKind.TASK)},
        'schema': {
            'type': 'model-fields',
            'fields': {
                'id': _field_str,
                'index': _field_int,
                'needs': _field_defaulted_tuple,
                'waits_for': _field_defaulted_tuple,
                'when': _field_optional_str,
                'trigger': _field_defaulted_literal_all_success_all_done,
                'loop': _field_optional_definition_ref,
                'loops': _field_defaulted_tuple,
                'generation': _field_defaulted_int_2,
                'title': _field_optional_str,
                'renamed_from': _field_defaulted_tuple,
                'args': _field_defaulted_dict_of_any_2,
                'for_each': _field_defaulted_any,
                'concurrency': _field_optional_int_or_str,
                'matrix': _field_defaulted_any,
                'fail_fast': _field_defaulted_bool,
                'kind': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [NodeKind.TASK]},
                        'default': NodeKind.TASK,
                    },
                },
                'task': _field_str,
                'retry': _field_optional_definition_ref_2,
                'timeout': _field_optional_float_or_str,
                'idempotent': {
                    'type': 'model-field',
                    'schema': {'type': 'default', 'schema': {'type': 'bool'}, 'default': False},
                },
                'until': _field_optional_str,
            },
            'model_name': 'TaskNode',
            'computed_fields': [],
        },
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'TaskNode',
    },
    'serialization': _function_wrap,
    'ref': 'TaskNode',
}

_PlanApproval: dict[str, Any] = {
    'type': 'model',
    'cls': PlanApproval,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'reason': _field_str,
            'context': _field_defaulted_any,
            'form': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _tuple},
                    'default': None,
                },
            },
            'timeout': _field_optional_float_or_str,
            'on_timeout': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'union',
                        'choices': [
                            {'type': 'literal', 'expected': ['fail', 'skip']},
                            _dict_of_any,
                        ],
                    },
                    'default': 'fail',
                },
            },
        },
        'model_name': 'PlanApproval',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanApproval',
    },
    'serialization': {
        'type': 'function-wrap',
        'function': without_timeout,
        'info_arg': False,
        'return_schema': _dict_of_any,
    },
    'ref': 'PlanApproval',
}

_ApprovalNode: dict[str, Any] = {
    'type': 'model',
    'cls': ApprovalNode,
    'schema': {
        'type': 'function-before',
        'function': {'type': 'no-info', 'function': read_format_1(NodeKind.APPROVAL)},
        'schema': {
            'type': 'model-fields',
            'fields': {
                'id': _field_str,
                'index': _field_int,
                'needs': _field_defaulted_tuple,
                'waits_for': _field_defaulted_tuple,
                'when': _field_optional_str,
                'trigger': _field_defaulted_literal_all_success_all_done,
                'loop': _field_optional_definition_ref,
                'loops': _field_defaulted_tuple,
                'generation': _field_defaulted_int_2,
                'title': _field_optional_str,
                'renamed_from': _field_defaulted_tuple,
                'kind': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [NodeKind.APPROVAL]},
                        'default': NodeKind.APPROVAL,
                    },
                },
                'approval': {'type': 'model-field', 'schema': _PlanApproval},
            },
            'model_name': 'ApprovalNode',
            'computed_fields': [],
        },
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'ApprovalNode',
    },
    'serialization': _function_wrap,
    'ref': 'ApprovalNode',
}

_PlanSubworkflow: dict[str, Any] = {
    'type': 'model',
    'cls': PlanSubworkflow,
    'schema': {
        'type': 'model-fields',
        'fields': {'path': _field_str, 'plan': {'type': 'model-field', 'schema': _definition_ref}},
        'model_name': 'PlanSubworkflow',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanSubworkflow',
    },
    'ref': 'PlanSubworkflow',
}

_WorkflowNode: dict[str, Any] = {
    'type': 'model',
    'cls': WorkflowNode,
    'schema': {
        'type': 'function-before',
        'function': {'type': 'no-info', 'function': read_format_1(NodeKind.WORKFLOW)},
        'schema': {
            'type': 'model-fields',
            'fields': {
                'id': _field_str,
                'index': _field_int,
                'needs': _field_defaulted_tuple,
                'waits_for': _field_defaulted_tuple,
                'when': _field_optional_str,
                'trigger': _field_defaulted_literal_all_success_all_done,
                'loop': _field_optional_definition_ref,
                'loops': _field_defaulted_tuple,
                'generation': _field_defaulted_int_2,
                'title': _field_optional_str,
                'renamed_from': _field_defaulted_tuple,
                'args': _field_defaulted_dict_of_any_2,
                'for_each': _field_defaulted_any,
                'concurrency': _field_optional_int_or_str,
                'matrix': _field_defaulted_any,
                'fail_fast': _field_defaulted_bool,
                'kind': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [NodeKind.WORKFLOW]},
                        'default': NodeKind.WORKFLOW,
                    },
                },
                'workflow': {'type': 'model-field', 'schema': _PlanSubworkflow},
            },
            'model_name': 'WorkflowNode',
            'computed_fields': [],
        },
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'WorkflowNode',
    },
    'serialization': _function_wrap,
    'ref': 'WorkflowNode',
}

_definition_ref_5: dict[str, Any] = {'type': 'definition-ref', 'schema_ref': 'PlanAgent'}

_AgentNode: dict[str, Any] = {
    'type': 'model',
    'cls': AgentNode,
    'schema': {
        'type': 'function-before',
        'function': {'type': 'no-info', 'function': read_format_1(NodeKind.AGENT)},
        'schema': {
            'type': 'model-fields',
            'fields': {
                'id': _field_str,
                'index': _field_int,
                'needs': _field_defaulted_tuple,
                'waits_for': _field_defaulted_tuple,
                'when': _field_optional_str,
                'trigger': _field_defaulted_literal_all_success_all_done,
                'loop': _field_optional_definition_ref,
                'loops': _field_defaulted_tuple,
                'generation': _field_defaulted_int_2,
                'title': _field_optional_str,
                'renamed_from': _field_defaulted_tuple,
                'kind': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [NodeKind.AGENT]},
                        'default': NodeKind.AGENT,
                    },
                },
                'agent': {'type': 'model-field', 'schema': _definition_ref_5},
                'retry': _field_optional_definition_ref_2,
                'timeout': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'nullable', 'schema': {'type': 'float'}},
                        'default': None,
                    },
                },
            },
            'model_name': 'AgentNode',
            'computed_fields': [],
        },
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'AgentNode',
    },
    'serialization': _function_wrap,
    'ref': 'AgentNode',
}

_PlanSwitch: dict[str, Any] = {
    'type': 'model',
    'cls': PlanSwitch,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'on': _field_str,
            'cases': {
                'type': 'model-field',
                'schema': {
                    'type': 'dict',
                    'keys_schema': {'type': 'str'},
                    'values_schema': _tuple_2,
                },
            },
            'default': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _tuple_2},
                    'default': None,
                },
            },
        },
        'model_name': 'PlanSwitch',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanSwitch',
    },
    'ref': 'PlanSwitch',
}

_SwitchNode: dict[str, Any] = {
    'type': 'model',
    'cls': SwitchNode,
    'schema': {
        'type': 'function-before',
        'function': {'type': 'no-info', 'function': read_format_1(NodeKind.SWITCH)},
        'schema': {
            'type': 'model-fields',
            'fields': {
                'id': _field_str,
                'index': _field_int,
                'needs': _field_defaulted_tuple,
                'waits_for': _field_defaulted_tuple,
                'when': _field_optional_str,
                'trigger': _field_defaulted_literal_all_success_all_done,
                'loop': _field_optional_definition_ref,
                'loops': _field_defaulted_tuple,
                'generation': _field_defaulted_int_2,
                'title': _field_optional_str,
                'renamed_from': _field_defaulted_tuple,
                'kind': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [NodeKind.SWITCH]},
                        'default': NodeKind.SWITCH,
                    },
                },
                'switch': {'type': 'model-field', 'schema': _PlanSwitch},
            },
            'model_name': 'SwitchNode',
            'computed_fields': [],
        },
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'SwitchNode',
    },
    'serialization': _function_wrap,
    'ref': 'SwitchNode',
}

_NoopNode: dict[str, Any] = {
    'type': 'model',
    'cls': NoopNode,
    'schema': {
        'type': 'function-before',
        'function': {'type': 'no-info', 'function': read_format_1(NodeKind.NOOP)},
        'schema': {
            'type': 'model-fields',
            'fields': {
                'id': _field_str,
                'index': _field_int,
                'needs': _field_defaulted_tuple,
                'waits_for': _field_defaulted_tuple,
                'when': _field_optional_str,
                'trigger': _field_defaulted_literal_all_success_all_done,
                'loop': _field_optional_definition_ref,
                'loops': _field_defaulted_tuple,
                'generation': _field_defaulted_int_2,
                'title': _field_optional_str,
                'renamed_from': _field_defaulted_tuple,
                'kind': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [NodeKind.NOOP]},
                        'default': NodeKind.NOOP,
                    },
                },
                'noop': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [True]},
                        'default': True,
                    },
                },
            },
            'model_name': 'NoopNode',
            'computed_fields': [],
        },
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'NoopNode',
    },
    'serialization': _function_wrap,
    'ref': 'NoopNode',
}

_FailNode: dict[str, Any] = {
    'type': 'model',
    'cls': FailNode,
    'schema': {
        'type': 'function-before',
        'function': {'type': 'no-info', 'function': read_format_1(NodeKind.FAIL)},
        'schema': {
            'type': 'model-fields',
            'fields': {
                'id': _field_str,
                'index': _field_int,
                'needs': _field_defaulted_tuple,
                'waits_for': _field_defaulted_tuple,
                'when': _field_optional_str,
                'trigger': _field_defaulted_literal_all_success_all_done,
                'loop': _field_optional_definition_ref,
                'loops': _field_defaulted_tuple,
                'generation': _field_defaulted_int_2,
                'title': _field_optional_str,
                'renamed_from': _field_defaulted_tuple,
                'kind': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [NodeKind.FAIL]},
                        'default': NodeKind.FAIL,
                    },
                },
                'fail': _field_str,
            },
            'model_name': 'FailNode',
            'computed_fields': [],
        },
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'FailNode',
    },
    'serialization': _function_wrap,
    'ref': 'FailNode',
}

_SleepNode: dict[str, Any] = {
    'type': 'model',
    'cls': SleepNode,
    'schema': {
        'type': 'function-before',
        'function': {'type': 'no-info', 'function': read_format_1(NodeKind.SLEEP)},
        'schema': {
            'type': 'model-fields',
            'fields': {
                'id': _field_str,
                'index': _field_int,
                'needs': _field_defaulted_tuple,
                'waits_for': _field_defaulted_tuple,
                'when': _field_optional_str,
                'trigger': _field_defaulted_literal_all_success_all_done,
                'loop': _field_optional_definition_ref,
                'loops': _field_defaulted_tuple,
                'generation': _field_defaulted_int_2,
                'title': _field_optional_str,
                'renamed_from': _field_defaulted_tuple,
                'kind': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [NodeKind.SLEEP]},
                        'default': NodeKind.SLEEP,
                    },
                },
                'sleep': _field_str,
            },
            'model_name': 'SleepNode',
            'computed_fields': [],
        },
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'SleepNode',
    },
    'serialization': _function_wrap,
    'ref': 'SleepNode',
}

_SleepUntilNode: dict[str, Any] = {
    'type': 'model',
    'cls': SleepUntilNode,
    'schema': {
        'type': 'function-before',
        'function': {'type': 'no-info', 'function': read_format_1(NodeKind.SLEEP_UNTIL)},
        'schema': {
            'type': 'model-fields',
            'fields': {
                'id': _field_str,
                'index': _field_int,
                'needs': _field_defaulted_tuple,
                'waits_for': _field_defaulted_tuple,
                'when': _field_optional_str,
                'trigger': _field_defaulted_literal_all_success_all_done,
                'loop': _field_optional_definition_ref,
                'loops': _field_defaulted_tuple,
                'generation': _field_defaulted_int_2,
                'title': _field_optional_str,
                'renamed_from': _field_defaulted_tuple,
                'kind': {
                    'type': 'model-field',
                    'schema': {
                        'type': 'default',
                        'schema': {'type': 'literal', 'expected': [NodeKind.SLEEP_UNTIL]},
                        'default': NodeKind.SLEEP_UNTIL,
                    },
                },
                'sleep_until': _field_str,
            },
            'model_name': 'SleepUntilNode',
            'computed_fields': [],
        },
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'SleepUntilNode',
    },
    'serialization': _function_wrap,
    'ref': 'SleepUntilNode',
}

_SourceRef: dict[str, Any] = {
    'type': 'model',
    'cls': SourceRef,
    'schema': {
        'type': 'model-fields',
        'fields': {'file': _field_str, 'line': _field_int, 'col': _field_int},
        'model_name': 'SourceRef',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'SourceRef',
    },
    'ref': 'SourceRef',
}

_Plan: dict[str, Any] = {
    'type': 'model',
    'cls': Plan,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'tether_plan': _field_defaulted_int,
            'name': _field_str,
            'description': _field_optional_str,
            'inputs': {
                'type': 'model-field',
                'schema': {'type': 'default', 'schema': _tuple, 'default': ()},
            },
            'secrets': _field_defaulted_tuple,
            'schedule': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _PlanSchedule},
                    'default': None,
                },
            },
            'webhook': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _PlanWebhook},
                    'default': None,
                },
            },
            'manual': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _PlanManual},
                    'default': None,
                },
            },
            'concurrency': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _PlanConcurrency},
                    'default': None,
                },
            },
            'nodes': {
                'type': 'model-field',
                'schema': {
                    'type': 'tuple',
                    'items_schema': [
                        {
                            'type': 'tagged-union',
                            'choices': {
                                NodeKind.TASK: _TaskNode,
                                NodeKind.APPROVAL: _ApprovalNode,
                                NodeKind.WORKFLOW: _WorkflowNode,
                                NodeKind.AGENT: _AgentNode,
                                NodeKind.SWITCH: _SwitchNode,
                                NodeKind.NOOP: _NoopNode,
                                NodeKind.FAIL: _FailNode,
                                NodeKind.SLEEP: _SleepNode,
                                NodeKind.SLEEP_UNTIL: _SleepUntilNode,
                            },
                            'discriminator': 'kind',
                            'strict': False,
                            'from_attributes': True,
                        },
                    ],
                    'variadic_item_index': 0,
                },
            },
            'agents': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'tuple',
                        'items_schema': [_definition_ref_5],
                        'variadic_item_index': 0,
                    },
                    'default': (),
                },
            },
            'generations': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'tuple',
                        'items_schema': [_tuple_2],
                        'variadic_item_index': 0,
                    },
                    'default': (),
                },
            },
            'output': _field_defaulted_any,
            'source_map': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'dict',
                        'keys_schema': {'type': 'str'},
                        'values_schema': _SourceRef,
                    },
                    'default_factory': dict,
                    'default_factory_takes_data': False,
                },
            },
            'fingerprint': {
                'type': 'model-field',
                'schema': {'type': 'default', 'schema': {'type': 'str'}, 'default': ''},
            },
        },
        'model_name': 'Plan',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'Plan',
    },
    'serialization': {
        'type': 'function-wrap',
        'function': without_empty_secrets,
        'info_arg': False,
        'return_schema': _dict_of_any,
    },
    'ref': 'Plan',
}

_PlanInput: dict[str, Any] = {
    'type': 'model',
    'cls': PlanInput,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'name': _field_str,
            'type': _field_str,
            'required': {'type': 'model-field', 'schema': {'type': 'bool'}},
            'default': _field_defaulted_any,
            'description': _field_optional_str,
            'enum': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'nullable',
                        'schema': {
                            'type': 'tuple',
                            'items_schema': [{'type': 'any'}],
                            'variadic_item_index': 0,
                        },
                    },
                    'default': None,
                },
            },
        },
        'model_name': 'PlanInput',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanInput',
    },
    'serialization': {
        'type': 'function-wrap',
        'function': without_absent_enum,
        'info_arg': False,
        'return_schema': _dict_of_any,
    },
    'ref': 'PlanInput',
}

_PlanLoop: dict[str, Any] = {
    'type': 'model',
    'cls': PlanLoop,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'to': _field_str,
            'while_': {
                'type': 'model-field',
                'schema': {'type': 'str'},
                'validation_alias': 'while',
                'serialization_alias': 'while',
            },
            'max_iterations': {'type': 'model-field', 'schema': _int_or_str},
            'on_exhausted': {
                'type': 'model-field',
                'schema': {'type': 'literal', 'expected': ['fail', 'continue']},
            },
            'body': {'type': 'model-field', 'schema': _tuple_2},
        },
        'model_name': 'PlanLoop',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanLoop',
    },
    'ref': 'PlanLoop',
}

_PlanRetry: dict[str, Any] = {
    'type': 'model',
    'cls': PlanRetry,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'max_attempts': _field_int,
            'backoff': {'type': 'model-field', 'schema': {'type': 'float'}},
            'strategy': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'literal', 'expected': ['exponential', 'fixed']},
                    'default': 'exponential',
                },
            },
        },
        'model_name': 'PlanRetry',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanRetry',
    },
    'serialization': {
        'type': 'function-wrap',
        'function': without_default_strategy,
        'info_arg': False,
        'return_schema': _dict_of_any,
    },
    'ref': 'PlanRetry',
}

_PlanModelRef: dict[str, Any] = {
    'type': 'model',
    'cls': PlanModelRef,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'provider': {
                'type': 'model-field',
                'schema': {'type': 'literal', 'expected': ['openai', 'anthropic']},
            },
            'name': _field_str,
            'base_url': _field_optional_str,
            'api_key_env': _field_optional_str,
        },
        'model_name': 'PlanModelRef',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanModelRef',
    },
    'ref': 'PlanModelRef',
}

_PlanTool: dict[str, Any] = {
    'type': 'model',
    'cls': PlanTool,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'name': _field_str,
            'kind': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'literal', 'expected': ['task', 'worker']},
                    'default': 'task',
                },
            },
        },
        'model_name': 'PlanTool',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanTool',
    },
    'ref': 'PlanTool',
}

_PlanToolCalls: dict[str, Any] = {
    'type': 'model',
    'cls': PlanToolCalls,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'per_turn': {
                'type': 'model-field',
                'schema': {'type': 'default', 'schema': {'type': 'int'}, 'default': 64},
            },
            'per_run': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': {'type': 'int'}},
                    'default': None,
                },
            },
        },
        'model_name': 'PlanToolCalls',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanToolCalls',
    },
    'ref': 'PlanToolCalls',
}

_PlanAgent: dict[str, Any] = {
    'type': 'model',
    'cls': PlanAgent,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'id': _field_str,
            'model': {'type': 'model-field', 'schema': _PlanModelRef},
            'instructions': _field_optional_str,
            'prompt': _field_optional_str,
            'tools': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'tuple',
                        'items_schema': [_PlanTool],
                        'variadic_item_index': 0,
                    },
                    'default': (),
                },
            },
            'max_turns': _field_int,
            'output': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _dict_of_any},
                    'default': None,
                },
            },
            'handoffs': _field_defaulted_tuple,
            'approve_tools': _field_defaulted_tuple,
            'max_tool_calls': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': _PlanToolCalls,
                    'default': made(PlanToolCalls, {'per_turn': 64, 'per_run': None}, []),
                },
            },
        },
        'model_name': 'PlanAgent',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'PlanAgent',
    },
    'serialization': {
        'type': 'function-wrap',
        'function': without_default_limits,
        'info_arg': False,
        'return_schema': _dict_of_any,
    },
    'ref': 'PlanAgent',
}

SCHEMA: dict[str, Any] = {
    'type': 'definitions',
    'schema': _definition_ref,
    'definitions': [_Plan, _PlanInput, _PlanLoop, _PlanRetry, _PlanAgent],
}
