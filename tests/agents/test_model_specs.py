"""Model references, keys from the environment, and the providers' SDKs as optional extras."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from agents_support import OPENAI_KEY

from tether.agents import (
    MissingAPIKey,
    ModelSpec,
    ModelSpecError,
    Provider,
    open_model,
    parse_model_spec,
    require_provider,
)
from tether.agents.providers import resolve_api_key


def test_a_string_names_provider_and_model() -> None:
    """``provider:model``; the model name may itself contain colons."""
    spec = parse_model_spec("openai:gpt-4.1-mini")
    assert spec == ModelSpec(provider=Provider.OPENAI, name="gpt-4.1-mini")
    assert str(spec) == "openai:gpt-4.1-mini"
    assert parse_model_spec("anthropic:claude:tuned").name == "claude:tuned"
    assert parse_model_spec(spec) is spec


def test_a_mapping_gives_base_url_and_key_variable() -> None:
    spec = parse_model_spec({"provider": "anthropic", "name": "claude-x",
                             "base_url": "http://127.0.0.1:9/v1", "api_key_env": "MY_KEY"})
    assert (spec.provider, spec.base_url, spec.key_env) == (
        Provider.ANTHROPIC, "http://127.0.0.1:9/v1", "MY_KEY")
    assert parse_model_spec("openai:m").key_env == "OPENAI_API_KEY"
    assert parse_model_spec("anthropic:m").key_env == "ANTHROPIC_API_KEY"


@pytest.mark.parametrize(("value", "message"), [
    ("gpt-4.1", "invalid model 'gpt-4.1': write it as provider:model, e.g. openai:gpt-4.1-mini"),
    ("opnai:gpt-4.1", "invalid model 'opnai:gpt-4.1': unknown provider 'opnai'; did you mean "
                      "'openai'?"),
    ("mistral:large", "invalid model 'mistral:large': unknown provider 'mistral' (known: "
                      "openai, anthropic)"),
    ("openai:", "invalid model 'openai:': name: String should have at least 1 character"),
    ({"name": "m"}, "invalid model {'name': 'm'}: a provider is required (one of openai, "
                    "anthropic)"),
    ({"provider": "openai", "name": "m", "key": "x"},
     "invalid model {'provider': 'openai', 'name': 'm', 'key': 'x'}: key: Extra inputs are "
     "not permitted"),
    ({"provider": "openai", "name": "m", "base_url": "localhost:8000"},
     "invalid model {'provider': 'openai', 'name': 'm', 'base_url': 'localhost:8000'}: "
     "base_url: String should match pattern '^https?://\\S+$'"),
    ({"provider": "openai", "name": "m", "api_key_env": "MY-KEY"},
     "invalid model {'provider': 'openai', 'name': 'm', 'api_key_env': 'MY-KEY'}: "
     "api_key_env: String should match pattern '^[A-Za-z_][A-Za-z0-9_]*$'"),
    (42, "invalid model 42: expected 'provider:model' or a mapping"),
])
def test_bad_references_say_what_is_wrong(value: object, message: str) -> None:
    with pytest.raises(ModelSpecError) as caught:
        parse_model_spec(value)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_the_key_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    """``api_key_env`` names the variable; unset or blank is a typed error naming it."""
    spec = parse_model_spec({"provider": "openai", "name": "m", "api_key_env": "TEAM_KEY"})
    monkeypatch.setenv("TEAM_KEY", "sk-team")
    assert resolve_api_key(spec) == "sk-team"
    monkeypatch.setenv("TEAM_KEY", "  ")
    with pytest.raises(MissingAPIKey) as caught:
        resolve_api_key(spec)
    assert str(caught.value) == ("the openai model needs an API key: set the environment "
                                 "variable TEAM_KEY")
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    with pytest.raises(MissingAPIKey, match="ANTHROPIC_API_KEY"):
        open_model("anthropic:claude-x")


def test_an_open_model_never_shows_its_key() -> None:
    model = open_model("openai:gpt-4.1-mini")
    assert repr(model) == "OpenAIModel(openai:gpt-4.1-mini)"
    assert OPENAI_KEY not in repr(model) and OPENAI_KEY not in repr(model.spec)


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=120, check=False)


def test_importing_agents_and_testing_does_not_import_the_sdks() -> None:
    """The base install works without the extras: the SDKs load only when a model opens."""
    result = run_python("""
        import sys
        import tether.agents, tether.testing, tether.agents.providers
        from tether.agents import tool_spec, Conversation, parse_model_spec
        print(sorted(m for m in ("openai", "anthropic", "httpx2") if m in sys.modules))
    """)
    assert result.stdout.strip() == "[]", result.stderr


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_missing_sdk_is_a_clear_error(provider: str) -> None:
    """Without the package, opening (or checking) a model says which extra to install."""
    result = run_python(f"""
        import os, sys
        sys.modules[{provider!r}] = None  # what an uninstalled package looks like to import
        os.environ["OPENAI_API_KEY"] = os.environ["ANTHROPIC_API_KEY"] = "k"
        from tether.agents import open_model, require_provider, ProviderUnavailable
        for attempt in (open_model, require_provider):
            try:
                attempt("{provider}:m")
            except ProviderUnavailable as exc:
                print(exc)
    """)
    expected = (f"the {provider} provider needs the '{provider}' package, which is not "
                f"installed: pip install 'tether[{provider}]'")
    assert result.stdout.splitlines() == [expected, expected], result.stderr


def test_require_provider_accepts_an_installed_sdk() -> None:
    assert require_provider("anthropic:m").provider is Provider.ANTHROPIC

