"""What the document models say beyond their fields, in a module that imports no pydantic.

The format's version and closed value sets, the functions that put a value in its canonical
form before it is validated (``when: x > 1`` is ``"{{ x > 1 }}"``, ``needs: a`` is
``[a]``), and the two properties the compiler reads from the documents (a node's ``kind``,
an input's ``has_default``). :mod:`tether.dsl.document` (the pydantic models, the one
specification of the format) and :mod:`tether.dsl.document_light` (the same documents,
validated by pydantic-core alone for ``tether check``) both take them from here, so the two
cannot read a value differently.
"""

from __future__ import annotations

from tether.kinds import KIND_KEYS, NodeKind

FORMAT_VERSION = 1

INPUT_TYPES: tuple[str, ...] = ("string", "number", "integer", "boolean", "object", "array")
TRIGGER_RULES: tuple[str, ...] = ("all_success", "all_done", "any_success", "none_failed",
                                  "none_failed_min_one_success")


def as_expression(value: object) -> object:
    """Canonical form of a condition: ``true``/``false`` and bare text become ``{{ ... }}``.

    ``when: inputs.amount > 100`` and ``when: "{{ inputs.amount > 100 }}"`` mean the same, so
    both front ends store the braced form and compile to the same plan.
    """
    if isinstance(value, bool):
        return "{{ true }}" if value else "{{ false }}"
    if isinstance(value, str) and "{{" not in value and "{%" not in value and value.strip():
        return "{{ " + value.strip() + " }}"
    return value


def as_bare_expression(value: object) -> object:
    """A string ``for_each`` (or ``switch.on``) without braces is one expression, as a
    condition is: ``for_each: inputs.urls`` means ``"{{ inputs.urls }}"``."""
    return as_expression(value) if isinstance(value, str) else value


def as_list(value: object) -> object:
    """``needs: a`` is short for ``needs: [a]``."""
    return [value] if isinstance(value, str) else value


class NodeKindOf:
    """A node's ``kind`` (mixed into both node classes)."""

    @property
    def kind(self) -> NodeKind | None:
        """The node's kind, or None unless exactly one kind is given."""
        kinds = [kind for kind, key in KIND_KEYS if getattr(self, key) is not None]
        return kinds[0] if len(kinds) == 1 else None


class InputDefault:
    """An input's ``has_default`` (mixed into both input classes)."""

    @property
    def has_default(self) -> bool:
        """Whether the document gives a ``default`` (``default: null`` included)."""
        fields_set: set[str] = getattr(self, "__pydantic_fields_set__")  # noqa: B009
        return "default" in fields_set
