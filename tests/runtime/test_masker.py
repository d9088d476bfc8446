"""The masker works on values, never on JSON text (issue 22, "The masker corrupts data").

Unit properties of :class:`tether.runtime.secrets.Masker` and of the taint rule
(:func:`reads_secrets`, :func:`stored_form`); the end-to-end attacks are in
``test_secret_leaks.py``.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tether.runtime.secrets import (
    ANYWHERE,
    MASK,
    Masker,
    SecretsView,
    placeholder,
    reads_secrets,
    stored_form,
)

SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False,
                                                                 allow_infinity=False) | \
    st.text(max_size=30)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=5) | st.dictionaries(
    st.text(max_size=12), inner, max_size=5), max_leaves=25)
SECRETS = st.lists(st.text(min_size=4, max_size=20), min_size=1, max_size=3)


def _masker(secrets: list[str]) -> Masker:
    view = SecretsView(frozenset())
    for secret in secrets:
        view.taint(secret)
    return Masker(frozenset(), view.derived)


def _strings(value: Any) -> list[str]:
    """Every string value inside ``value`` (not its keys)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    return []


def _skeleton(value: Any) -> Any:
    """``value`` with every string value replaced by one marker: what masking may not change
    (keys, numbers, booleans, null, the shape)."""
    if isinstance(value, str):
        return "<str>"
    if isinstance(value, list):
        return [_skeleton(item) for item in value]
    if isinstance(value, dict):
        return {key: _skeleton(item) for key, item in value.items()}
    return value


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(JSON, SECRETS)
def test_masking_never_changes_a_value_without_a_secret_and_always_yields_json(
        value: Any, secrets: list[str]) -> None:
    """Random values and secrets: the result is valid JSON with the same keys, numbers,
    booleans, nulls and shape; a value none of whose strings contains a secret is returned
    unchanged (the same object)."""
    masked = _masker(secrets).value(value)
    assert json.loads(json.dumps(masked, allow_nan=False)) == masked
    assert _skeleton(masked) == _skeleton(value)
    if not any(secret in text for secret in secrets for text in _strings(value)):
        assert masked is value


@settings(max_examples=200, deadline=None)
@given(JSON, st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=ANYWHERE,
                     max_size=24), st.text(max_size=10), st.text(max_size=10))
def test_a_long_secret_never_survives_inside_any_string(value: Any, secret: str, before: str,
                                                        after: str) -> None:
    """A secret of at least ANYWHERE characters is masked wherever it stands in a string,
    even glued to other text."""
    planted = [value, before + secret + after, {"k": [secret]}]
    masked = _masker([secret]).value(planted)
    assert not any(secret in text for text in _strings(masked))
    assert _skeleton(masked) == _skeleton(planted)


@pytest.mark.parametrize(("secret", "value", "expected"), [
    # the red team's cases: numbers, booleans, null and keys are never touched
    ("1234", {"amount": 12345, "pin": 1234, "order": "order-12345"},
     {"amount": 12345, "pin": 1234, "order": "order-12345"}),
    ("true", {"ok": True, "text": "it is true"}, {"ok": True, "text": f"it is {MASK}"}),
    ("null", {"none": None, "word": "nullable"}, {"none": None, "word": "nullable"}),
    ("amount", {"amount": 5, "note": "amount"}, {"amount": 5, "note": MASK}),
    ("1234", ["pin 1234", "1234", "a1234", "1234-5"], [f"pin {MASK}", MASK, "a1234",
                                                       f"{MASK}-5"]),
    ('k"ey\\\n', {"s": 'x k"ey\\\n y'}, {"s": f"x {MASK} y"}),
])
def test_the_red_team_cases_keep_every_value_intact(secret: str, value: Any,
                                                    expected: Any) -> None:
    masked = _masker([secret]).value(value)
    assert masked == expected
    assert json.loads(json.dumps(masked)) == expected


def test_the_raw_environment_value_is_masked_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CARD_PIN", "4711")
    masker = Masker(frozenset({"CARD_PIN"}))
    assert masker.value({"pin": "pin=4711", "n": 4711}) == {"pin": f"pin={MASK}", "n": 4711}
    monkeypatch.delenv("CARD_PIN")
    assert masker.value({"pin": "pin=4711"}) == {"pin": "pin=4711"}


@pytest.mark.parametrize("template", [
    "{{ secrets.K }}", "{{ secrets.K | trim }}", "{{ secrets['K'] | upper }}",
    "x{{ secrets.K[:10] ~ secrets.K[10:] }}y", "{{ secrets.K.strip() == 'a' }}",
    "{% for c in secrets.K %}{{ c }}{% endfor %}", "{% set s = secrets %}{{ s.K }}",
])
def test_every_template_reading_secrets_is_secret(template: str) -> None:
    assert reads_secrets(template)


@pytest.mark.parametrize("template", ["{{ inputs.secrets }}", "secrets", "{{ nodes.a.output }}",
                                      "{{ 'secrets' }}"])
def test_templates_not_reading_secrets_are_not(template: str) -> None:
    assert not reads_secrets(template)


def test_the_stored_form_replaces_each_secret_part_by_its_placeholder() -> None:
    template = {"key": "{{ secrets.K | trim }}", "n": "{{ inputs.n }}",
                "list": ["plain", "Bearer {{ secrets.K }}"], "nested": {"k": "{{ secrets.K }}"}}
    rendered = {"key": "abc", "n": 3, "list": ["plain", "Bearer abc\n"], "nested": {"k": "z"}}
    assert stored_form(template, rendered) == {
        "key": placeholder("{{ secrets.K | trim }}"), "n": 3,
        "list": ["plain", "<secret: Bearer {{ secrets.K }}>"],
        "nested": {"k": "<secret: {{ secrets.K }}>"}}


def test_the_journal_backstop_masks_values_of_a_row_and_never_its_paths_or_keys() -> None:
    """What reaches a row without passing the state's entry points (an agent's messages) is
    masked as values too: a delta's paths and every key stay, other bytes stay as written."""
    from tether.runtime.journal import _masked

    masker = _masker(["amount", 'k"ey-long-secret-1'])
    delta = json.dumps([[["nodes", "amount"], {"amount": 12345, "note": "amount"}],
                        [["messages"], ['say k"ey-long-secret-1!', 1234]]])
    snapshot = json.dumps({"amount": {"amount": "amounts"}})
    out_delta, out_input, out_none = _masked(masker, False, delta, '"amount"', None)
    assert json.loads(out_delta) == [[["nodes", "amount"], {"amount": 12345, "note": MASK}],
                                     [["messages"], [f"say {MASK}!", 1234]]]
    assert (json.loads(out_input), out_none) == (MASK, None)
    (same,) = _masked(masker, True, snapshot)
    assert same is snapshot  # "amounts" is another word: the text is kept byte for byte


def test_taint_remembers_every_string_of_a_derived_value_but_short_or_blank_ones() -> None:
    view = SecretsView(frozenset({"K"}))
    view.taint({"a": ["sk-1234", 1234, True, None, "abc", "    \n"], "b": "SK-1234"})
    assert list(view.derived) == ["sk-1234", "SK-1234"]
