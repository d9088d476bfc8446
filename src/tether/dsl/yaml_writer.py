"""Write a :class:`~tether.dsl.document.WorkflowDoc` as canonical YAML.

Keys come in the order of the format models (``tether``, ``name``, ``description``,
``inputs``, ``nodes``, ``output``; inside a node the order of :class:`NodeSpec`), with the
YAML spellings ``with`` and ``while``. Mappings are written in block style; short lists of
scalars (``needs: [a, b]``) in flow style. Scalars are emitted by PyYAML's safe dumper, which
quotes every string that would otherwise read back as something else (``"yes"``, ``"1.0"``,
``"2024-01-01"``, ``"null"``, ``""``); strings holding templates or line breaks are always
double-quoted.
Comments of the source are not kept.
"""

from __future__ import annotations

from typing import Any

import yaml

from tether.dsl.document import WorkflowDoc, dump_document

FLOW_LIST_WIDTH = 60


class _Dumper(yaml.SafeDumper):
    """The safe dumper with our choices of scalar and collection style.

    The pure-Python emitter, not libyaml's: the canonical text must not depend on whether
    libyaml is installed (they differ, e.g. libyaml escapes emoji), and it keeps printable
    characters of every plane as they are.
    """


_LINE_BREAKS = ("\n", "\x85", "\u2028", "\u2029")


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    # Templates always double-quoted. Line breaks too: escapes read better than the blank
    # lines of a folded scalar, and PyYAML's emitter would write NEL, LS and PS raw, which a
    # YAML reader then folds into spaces.
    quote = "{{" in data or "{%" in data or any(brk in data for brk in _LINE_BREAKS)
    style = '"' if quote else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _represent_list(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.SequenceNode:
    scalars = all(isinstance(item, str | int | float | bool) for item in data)
    short = sum(len(str(item)) + 2 for item in data) <= FLOW_LIST_WIDTH
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data,
                                     flow_style=bool(scalars and short))


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.MappingNode:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items(), flow_style=not data)


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(list, _represent_list)
_Dumper.add_representer(dict, _represent_dict)


def write_yaml(doc: WorkflowDoc) -> str:
    """The canonical YAML text of ``doc`` (comments of the source are not kept).

    Args:
        doc: A validated workflow document.

    Returns:
        YAML that :func:`~tether.dsl.yaml_reader.read_yaml` reads back to an equal document.
    """
    text = yaml.dump(
        dump_document(doc),
        Dumper=_Dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=2**16,
        indent=2,
    )
    return str(text)
