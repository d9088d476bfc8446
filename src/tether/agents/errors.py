"""The errors of agent nodes' groundwork, a subtree of :class:`tether.errors.TetherError`.

::

    TetherError
    └── ExecutionError
        └── AgentError             something about models, tools or conversations
        ├── ModelSpecError         a model reference that cannot be used (``openai:gpt-4.1``)
        ├── ProviderUnavailable    the provider's SDK is not installed (the extra is missing)
        ├── MissingAPIKey          the environment variable holding the key is unset or empty
        ├── ModelError             a model call failed; ``retryable`` says whether to retry
        ├── ToolSchemaError        a tool's parameters have no JSON Schema (a compile-time check)
        ├── ToolArgumentsError     arguments the model sent do not match the tool's schema
        └── ConversationError      a stored conversation that cannot be read back

Every error builds its message from its fields. No message ever contains an API key: a
:class:`ModelError` masks the key of the call that failed wherever it appears.
"""

from __future__ import annotations

from tether.errors import ExecutionError

MASK = "****"


def mask_secret(text: str, secret: str | None) -> str:
    """``text`` with every occurrence of ``secret`` replaced by ``****``."""
    if not secret:
        return text
    return text.replace(secret, MASK)


class AgentError(ExecutionError):
    """Base class of the errors about models, tools and conversations."""


class ModelSpecError(AgentError):
    """A model reference (``provider:name`` or a mapping) that cannot be used."""

    def __init__(self, value: object, reason: str) -> None:
        self.value = repr(value)
        self.reason = reason
        super().__init__(f"invalid model {self.value}: {reason}")


class ProviderUnavailable(AgentError):
    """The official SDK a provider needs is not installed."""

    def __init__(self, provider: str, package: str) -> None:
        self.provider = provider
        self.package = package
        super().__init__(
            f"the {provider} provider needs the '{package}' package, which is not installed: "
            f"pip install 'tether[{provider}]'"
        )


class MissingAPIKey(AgentError):
    """No API key in the environment variable a model reads it from."""

    def __init__(self, provider: str, env_var: str) -> None:
        self.provider = provider
        self.env_var = env_var
        super().__init__(
            f"the {provider} model needs an API key: set the environment variable {env_var}"
        )


class ModelError(AgentError):
    """A model call failed.

    ``retryable`` is true for timeouts, connection errors, rate limits (429) and server errors
    (5xx): the same request may succeed later, after ``retry_after`` seconds when the server
    said so. Any other refusal (400, 401, 403, 404, ...) is final for this request.
    """

    def __init__(
        self,
        *,
        provider: str,
        model: str,
        message: str,
        retryable: bool,
        status_code: int | None = None,
        error_type: str | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.provider = provider
        self.model = model
        self.message = message
        self.retryable = retryable
        self.status_code = status_code
        self.error_type = error_type
        self.retry_after = retry_after
        status = f"HTTP {status_code}" if status_code is not None else "no response"
        kind = f" {error_type}" if error_type else ""
        wait = f"; retry after {retry_after:g}s" if retry_after is not None else ""
        super().__init__(f"{provider}:{model} failed ({status}{kind}): {message}{wait}")


class ToolSchemaError(AgentError):
    """A tool whose parameters cannot be described to a model as JSON Schema."""

    def __init__(self, tool: str, reason: str, *, parameter: str | None = None) -> None:
        self.tool = tool
        self.parameter = parameter
        self.reason = reason
        where = f"parameter '{parameter}' of tool '{tool}'" if parameter else f"tool '{tool}'"
        super().__init__(f"{where}: {reason}")


class ToolArgumentsError(AgentError):
    """Arguments a model sent that do not match the tool's schema.

    ``text`` is written for the model: it is returned as the tool call's (error) result so
    the model can correct its call.
    """

    def __init__(self, tool: str, problems: list[str]) -> None:
        self.tool = tool
        self.problems = problems
        self.text = f"Invalid arguments for tool '{tool}': " + "; ".join(problems)
        super().__init__(self.text)


class ConversationError(AgentError):
    """A serialised conversation that is not valid (not JSON, or not our message shapes)."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        super().__init__(f"invalid conversation: {reason}")
