"""The core schema of the workflow document (generated: do not edit).

Made by ``python -m tether.dsl.document_schema_gen`` (``make document-schema``) from
tether.dsl.document; read by tether.dsl.document_light.
"""

from __future__ import annotations

from typing import Any

from tether.dsl.document_light import (
    AgentSpec,
    ApprovalSpec,
    ConcurrencySpec,
    InputSpec,
    LoopSpec,
    ManualSpec,
    ModelRef,
    NodeSpec,
    RetryPolicy,
    ScheduleSpec,
    SwitchSpec,
    ToolCallLimitsSpec,
    TriggersSpec,
    WebhookSpec,
    WorkflowDoc,
)
from tether.dsl.document_rules import as_bare_expression, as_expression, as_list

PYDANTIC_VERSION = '2.14.4'
PYDANTIC_CORE_VERSION = '2.50.5'

_field_str: dict[str, Any] = {'type': 'model-field', 'schema': {'type': 'str'}}

_nullable_str: dict[str, Any] = {'type': 'nullable', 'schema': {'type': 'str'}}

_optional_str: dict[str, Any] = {'type': 'default', 'schema': _nullable_str, 'default': None}

_field_optional_str: dict[str, Any] = {'type': 'model-field', 'schema': _optional_str}

_defaulted_any: dict[str, Any] = {'type': 'default', 'schema': {'type': 'any'}, 'default': None}

_field_defaulted_any: dict[str, Any] = {'type': 'model-field', 'schema': _defaulted_any}

_InputSpec: dict[str, Any] = {
    'type': 'model',
    'cls': InputSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'type': {
                'type': 'model-field',
                'schema': {
                    'type': 'literal',
                    'expected': ['string', 'number', 'integer', 'boolean', 'object', 'array'],
                },
            },
            'default': _field_defaulted_any,
            'enum': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'nullable',
                        'schema': {'type': 'list', 'items_schema': {'type': 'any'}},
                    },
                    'default': None,
                },
            },
            'description': _field_optional_str,
        },
        'model_name': 'InputSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'InputSpec',
    },
}

_dict_of_InputSpec: dict[str, Any] = {
    'type': 'dict',
    'keys_schema': {'type': 'str'},
    'values_schema': _InputSpec,
}

_nullable_dict_of_InputSpec: dict[str, Any] = {'type': 'nullable', 'schema': _dict_of_InputSpec}

_optional_dict_of_InputSpec: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_dict_of_InputSpec,
    'default': None,
}

_field_optional_dict_of_InputSpec: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_dict_of_InputSpec,
}

_list_of_str: dict[str, Any] = {'type': 'list', 'items_schema': {'type': 'str'}}

_nullable_list_of_str: dict[str, Any] = {'type': 'nullable', 'schema': _list_of_str}

_optional_list_of_str: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_list_of_str,
    'default': None,
}

_field_optional_list_of_str: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_list_of_str,
}

_dict_of_any: dict[str, Any] = {
    'type': 'dict',
    'keys_schema': {'type': 'str'},
    'values_schema': {'type': 'any'},
}

_nullable_dict_of_any: dict[str, Any] = {'type': 'nullable', 'schema': _dict_of_any}

_optional_dict_of_any: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_dict_of_any,
    'default': None,
}

_field_optional_dict_of_any: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_dict_of_any,
}

_ScheduleSpec: dict[str, Any] = {
    'type': 'model',
    'cls': ScheduleSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'cron': _field_str,
            'timezone': _field_optional_str,
            'inputs': _field_optional_dict_of_any,
            'catchup': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'nullable',
                        'schema': {'type': 'literal', 'expected': ['none', 'latest', 'all']},
                    },
                    'default': None,
                },
            },
        },
        'model_name': 'ScheduleSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'ScheduleSpec',
    },
}

_nullable_ScheduleSpec: dict[str, Any] = {'type': 'nullable', 'schema': _ScheduleSpec}

_optional_ScheduleSpec: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_ScheduleSpec,
    'default': None,
}

_field_optional_ScheduleSpec: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_ScheduleSpec,
}

_ManualSpec: dict[str, Any] = {
    'type': 'model',
    'cls': ManualSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {'users': _field_optional_list_of_str},
        'model_name': 'ManualSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'ManualSpec',
    },
}

_WebhookSpec: dict[str, Any] = {
    'type': 'model',
    'cls': WebhookSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'verify': {
                'type': 'model-field',
                'schema': {'type': 'literal', 'expected': ['github', 'stripe', 'hmac']},
            },
            'secret': _field_str,
            'path': _field_optional_str,
            'inputs': _field_optional_dict_of_any,
            'headers': _field_optional_list_of_str,
            'header': _field_optional_str,
            'timestamp_header': _field_optional_str,
            'delivery_header': _field_optional_str,
            'tolerance': _field_optional_str,
        },
        'model_name': 'WebhookSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'WebhookSpec',
    },
}

_TriggersSpec: dict[str, Any] = {
    'type': 'model',
    'cls': TriggersSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'manual': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'nullable',
                        'schema': {'type': 'union', 'choices': [{'type': 'bool'}, _ManualSpec]},
                    },
                    'default': None,
                },
            },
            'webhook': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _WebhookSpec},
                    'default': None,
                },
            },
            'schedule': _field_optional_ScheduleSpec,
        },
        'model_name': 'TriggersSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'TriggersSpec',
    },
}

_nullable_int: dict[str, Any] = {'type': 'nullable', 'schema': {'type': 'int'}}

_optional_int: dict[str, Any] = {'type': 'default', 'schema': _nullable_int, 'default': None}

_field_optional_int: dict[str, Any] = {'type': 'model-field', 'schema': _optional_int}

_ConcurrencySpec: dict[str, Any] = {
    'type': 'model',
    'cls': ConcurrencySpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'key': _field_str,
            'limit': _field_optional_int,
            'on_conflict': _field_optional_str,
        },
        'model_name': 'ConcurrencySpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'ConcurrencySpec',
    },
}

_ApprovalSpec: dict[str, Any] = {
    'type': 'model',
    'cls': ApprovalSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'reason': _field_str,
            'context': _field_defaulted_any,
            'form': _field_optional_dict_of_InputSpec,
            'timeout': _field_optional_str,
            'on_timeout': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'nullable',
                        'schema': {
                            'type': 'union',
                            'choices': [
                                {'type': 'literal', 'expected': ['fail', 'skip']},
                                _dict_of_any,
                            ],
                        },
                    },
                    'default': None,
                },
            },
        },
        'model_name': 'ApprovalSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'ApprovalSpec',
    },
}

_ModelRef: dict[str, Any] = {
    'type': 'model',
    'cls': ModelRef,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'provider': _field_str,
            'name': _field_str,
            'base_url': _field_optional_str,
            'api_key_env': _field_optional_str,
        },
        'model_name': 'ModelRef',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'ModelRef',
    },
}

_ToolCallLimitsSpec: dict[str, Any] = {
    'type': 'model',
    'cls': ToolCallLimitsSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {'per_turn': _field_optional_int, 'per_run': _field_optional_int},
        'model_name': 'ToolCallLimitsSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'ToolCallLimitsSpec',
    },
}

_AgentSpec: dict[str, Any] = {
    'type': 'model',
    'cls': AgentSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'model': {
                'type': 'model-field',
                'schema': {'type': 'union', 'choices': [{'type': 'str'}, _ModelRef]},
            },
            'instructions': _field_optional_str,
            'prompt': _field_optional_str,
            'tools': _field_optional_list_of_str,
            'max_turns': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': {'type': 'int', 'ge': 1}},
                    'default': None,
                },
            },
            'output': _field_optional_dict_of_any,
            'handoffs': _field_optional_list_of_str,
            'approve_tools': _field_optional_list_of_str,
            'max_tool_calls': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _ToolCallLimitsSpec},
                    'default': None,
                },
            },
        },
        'model_name': 'AgentSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'AgentSpec',
    },
}

_as_bare_expression: dict[str, Any] = {'type': 'no-info', 'function': as_bare_expression}

_as_bare_expression_then_any: dict[str, Any] = {
    'type': 'function-before',
    'function': _as_bare_expression,
    'schema': {'type': 'any'},
}

_as_list: dict[str, Any] = {'type': 'no-info', 'function': as_list}

_str_or_list_of_str: dict[str, Any] = {'type': 'union', 'choices': [{'type': 'str'}, _list_of_str]}

_as_list_then_list_of_str: dict[str, Any] = {
    'type': 'function-before',
    'function': _as_list,
    'schema': _list_of_str,
    'json_schema_input_schema': _str_or_list_of_str,
}

_nullable_as_list_then_list_of_str: dict[str, Any] = {
    'type': 'nullable',
    'schema': _as_list_then_list_of_str,
}

_optional_as_list_then_list_of_str: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_as_list_then_list_of_str,
    'default': None,
}

_field_optional_as_list_then_list_of_str: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_as_list_then_list_of_str,
}

_SwitchSpec: dict[str, Any] = {
    'type': 'model',
    'cls': SwitchSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'on': {'type': 'model-field', 'schema': _as_bare_expression_then_any},
            'cases': {
                'type': 'model-field',
                'schema': {
                    'type': 'dict',
                    'keys_schema': {'type': 'str'},
                    'values_schema': _as_list_then_list_of_str,
                    'min_length': 1,
                },
            },
            'default': _field_optional_as_list_then_list_of_str,
        },
        'model_name': 'SwitchSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'SwitchSpec',
    },
}

_nullable_bool: dict[str, Any] = {'type': 'nullable', 'schema': {'type': 'bool'}}

_optional_bool: dict[str, Any] = {'type': 'default', 'schema': _nullable_bool, 'default': None}

_field_optional_bool: dict[str, Any] = {'type': 'model-field', 'schema': _optional_bool}

_as_expression: dict[str, Any] = {'type': 'no-info', 'function': as_expression}

_str_or_bool: dict[str, Any] = {'type': 'union', 'choices': [{'type': 'str'}, {'type': 'bool'}]}

_as_expression_then_str: dict[str, Any] = {
    'type': 'function-before',
    'function': _as_expression,
    'schema': {'type': 'str'},
    'json_schema_input_schema': _str_or_bool,
}

_nullable_as_expression_then_str: dict[str, Any] = {
    'type': 'nullable',
    'schema': _as_expression_then_str,
}

_optional_as_expression_then_str: dict[str, Any] = {
    'type': 'default',
    'schema': _nullable_as_expression_then_str,
    'default': None,
}

_field_optional_as_expression_then_str: dict[str, Any] = {
    'type': 'model-field',
    'schema': _optional_as_expression_then_str,
}

_int_or_str: dict[str, Any] = {
    'type': 'union',
    'choices': [{'type': 'int', 'ge': 1}, {'type': 'str'}],
}

_RetryPolicy: dict[str, Any] = {
    'type': 'model',
    'cls': RetryPolicy,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'max_attempts': {'type': 'model-field', 'schema': {'type': 'int', 'ge': 1}},
            'backoff': _field_optional_str,
            'strategy': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'nullable',
                        'schema': {'type': 'literal', 'expected': ['exponential', 'fixed']},
                    },
                    'default': None,
                },
            },
        },
        'model_name': 'RetryPolicy',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'RetryPolicy',
    },
}

_LoopSpec: dict[str, Any] = {
    'type': 'model',
    'cls': LoopSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'to': _field_str,
            'while_': {
                'type': 'model-field',
                'schema': _as_expression_then_str,
                'validation_alias': 'while',
                'serialization_alias': 'while',
            },
            'max_iterations': {'type': 'model-field', 'schema': _int_or_str},
            'on_exhausted': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'nullable',
                        'schema': {'type': 'literal', 'expected': ['fail', 'continue']},
                    },
                    'default': None,
                },
            },
        },
        'model_name': 'LoopSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'LoopSpec',
    },
}

_NodeSpec: dict[str, Any] = {
    'type': 'model',
    'cls': NodeSpec,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'task': _field_optional_str,
            'approval': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _ApprovalSpec},
                    'default': None,
                },
            },
            'workflow': _field_optional_str,
            'agent': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _AgentSpec},
                    'default': None,
                },
            },
            'switch': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _SwitchSpec},
                    'default': None,
                },
            },
            'noop': _field_optional_bool,
            'fail': _field_optional_str,
            'sleep': _field_optional_str,
            'sleep_until': _field_optional_str,
            'title': _field_optional_str,
            'renamed_from': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _str_or_list_of_str},
                    'default': None,
                },
            },
            'with_': {
                'type': 'model-field',
                'schema': _optional_dict_of_any,
                'validation_alias': 'with',
                'serialization_alias': 'with',
            },
            'needs': _field_optional_as_list_then_list_of_str,
            'when': _field_optional_as_expression_then_str,
            'trigger': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {
                        'type': 'nullable',
                        'schema': {
                            'type': 'literal',
                            'expected': [
                                'all_success',
                                'all_done',
                                'any_success',
                                'none_failed',
                                'none_failed_min_one_success',
                            ],
                        },
                    },
                    'default': None,
                },
            },
            'for_each': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': _as_bare_expression_then_any,
                    'default': None,
                },
            },
            'matrix': _field_optional_dict_of_any,
            'fail_fast': _field_optional_bool,
            'concurrency': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _int_or_str},
                    'default': None,
                },
            },
            'retry': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _RetryPolicy},
                    'default': None,
                },
            },
            'timeout': _field_optional_str,
            'until': _field_optional_as_expression_then_str,
            'idempotent': _field_optional_bool,
            'loop': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _LoopSpec},
                    'default': None,
                },
            },
        },
        'model_name': 'NodeSpec',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'NodeSpec',
    },
}

_WorkflowDoc: dict[str, Any] = {
    'type': 'model',
    'cls': WorkflowDoc,
    'schema': {
        'type': 'model-fields',
        'fields': {
            'tether': {'type': 'model-field', 'schema': {'type': 'int'}},
            'name': _field_str,
            'description': _field_optional_str,
            'inputs': _field_optional_dict_of_InputSpec,
            'secrets': _field_optional_list_of_str,
            'schedule': _field_optional_ScheduleSpec,
            'on': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _TriggersSpec},
                    'default': None,
                },
            },
            'concurrency': {
                'type': 'model-field',
                'schema': {
                    'type': 'default',
                    'schema': {'type': 'nullable', 'schema': _ConcurrencySpec},
                    'default': None,
                },
            },
            'nodes': {
                'type': 'model-field',
                'schema': {
                    'type': 'dict',
                    'keys_schema': {'type': 'str'},
                    'values_schema': _NodeSpec,
                    'min_length': 1,
                },
            },
            'output': _field_defaulted_any,
        },
        'model_name': 'WorkflowDoc',
        'computed_fields': [],
    },
    'custom_init': False,
    'root_model': False,
    'config': {
        'extra_fields_behavior': 'forbid',
        'strict': True,
        'validate_by_alias': True,
        'validate_by_name': True,
        'title': 'tether workflow',
    },
}

SCHEMA = _WorkflowDoc
CONFIG: dict[str, Any] = {
    'extra_fields_behavior': 'forbid',
    'strict': True,
    'validate_by_alias': True,
    'validate_by_name': True,
    'title': 'tether workflow',
}

FIELDS: dict[str, tuple[str, ...]] = {
    'InputSpec': ('type', 'default', 'enum', 'description'),
    'ScheduleSpec': ('cron', 'timezone', 'inputs', 'catchup'),
    'ManualSpec': ('users',),
    'WebhookSpec': (
        'verify',
        'secret',
        'path',
        'inputs',
        'headers',
        'header',
        'timestamp_header',
        'delivery_header',
        'tolerance',
    ),
    'TriggersSpec': ('manual', 'webhook', 'schedule'),
    'ConcurrencySpec': ('key', 'limit', 'on_conflict'),
    'ApprovalSpec': ('reason', 'context', 'form', 'timeout', 'on_timeout'),
    'ModelRef': ('provider', 'name', 'base_url', 'api_key_env'),
    'ToolCallLimitsSpec': ('per_turn', 'per_run'),
    'AgentSpec': (
        'model',
        'instructions',
        'prompt',
        'tools',
        'max_turns',
        'output',
        'handoffs',
        'approve_tools',
        'max_tool_calls',
    ),
    'SwitchSpec': ('on', 'cases', 'default'),
    'RetryPolicy': ('max_attempts', 'backoff', 'strategy'),
    'LoopSpec': ('to', 'while', 'max_iterations', 'on_exhausted'),
    'NodeSpec': (
        'task',
        'approval',
        'workflow',
        'agent',
        'switch',
        'noop',
        'fail',
        'sleep',
        'sleep_until',
        'title',
        'renamed_from',
        'with',
        'needs',
        'when',
        'trigger',
        'for_each',
        'matrix',
        'fail_fast',
        'concurrency',
        'retry',
        'timeout',
        'until',
        'idempotent',
        'loop',
    ),
    'WorkflowDoc': (
        'tether',
        'name',
        'description',
        'inputs',
        'secrets',
        'schedule',
        'on',
        'concurrency',
        'nodes',
        'output',
    ),
}
"""The keys of each model, as a document spells them."""
ALIASES: dict[str, str] = {'while_': 'while', 'with_': 'with'}
"""The fields a document spells otherwise (``while_`` is ``while``)."""
