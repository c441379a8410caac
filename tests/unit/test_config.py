"""Configuration from the environment (SPEC section 7): defaults, names and clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from llm_bot.config import ConfigurationError, Settings, load_settings

PASSWORD = "s3cr3t-Pa55word"  # planted to check it is never shown

# Every variable of the SPEC section 7 table, plus LLM_BOT_SHUTDOWN_GRACE_SECONDS (section 4):
# (variable, setting, default).
SPEC_DEFAULTS: list[tuple[str, str, Any]] = [
    ("AMQP_URL", "amqp_url", "amqp://guest:guest@localhost:5672/"),
    ("REDIS_URL", "redis_url", "redis://localhost:6379/0"),
    ("OPENAI_API_KEY", "openai_api_key", None),
    ("OPENAI_BASE_URL", "openai_base_url", None),
    ("OPENAI_MODEL", "openai_model", "gpt-4o-mini"),
    ("OPENAI_TIMEOUT_MS", "openai_timeout_ms", 30000),
    ("LLM_BOT_API", "api", "chat"),
    ("LLM_BOT_SYSTEM_PROMPT", "system_prompt", ""),
    ("LLM_BOT_MEMORY_MAX_MESSAGES", "memory_max_messages", 8),
    ("LLM_BOT_MEMORY_MAX_CHARS", "memory_max_chars", 8000),
    ("LLM_BOT_MEMORY_TTL_SECONDS", "memory_ttl_seconds", 1800),
    ("LLM_BOT_PREFETCH", "prefetch", 32),
    ("LLM_BOT_MAX_ATTEMPTS", "max_attempts", 5),
    ("LLM_BOT_MAX_BODY_BYTES", "max_body_bytes", 262144),
    ("LLM_BOT_HTTP_PORT", "http_port", 9464),
    ("LLM_BOT_IMPORTANCE_THRESHOLD", "importance_threshold", 0.5),
    ("LLM_BOT_LTM_MAX_ITEMS", "ltm_max_items", 1000),
    ("LLM_BOT_LTM_RETENTION_DAYS", "ltm_retention_days", 365),
    ("LLM_BOT_LOG_LEVEL", "log_level", "info"),
    ("LLM_BOT_LOG_FORMAT", "log_format", "json"),
    ("LLM_BOT_LOG_CONTENT", "log_content", False),
    ("LLM_BOT_SHUTDOWN_GRACE_SECONDS", "shutdown_grace_seconds", 20.0),
    ("LLM_BOT_INGRESS_EXCHANGE", "ingress_exchange", "internal"),
    ("LLM_BOT_INGRESS_ROUTING_KEY", "ingress_routing_key", "internal.llmbot.v1"),
    ("LLM_BOT_INGRESS_QUEUE", "ingress_queue", "llm-bot.internal.llmbot.v1"),
    ("LLM_BOT_CANDIDATE_ROUTING_KEY", "candidate_routing_key", "internal.candidate.v1"),
    ("LLM_BOT_ERROR_ROUTING_KEY", "error_routing_key", "internal.llmbot.error.v1"),
    ("LLM_BOT_DLX", "dlx", "internal.dlx"),
    ("LLM_BOT_DLQ", "dlq", "llm-bot.internal.llmbot.v1.dlq"),
]

# A non-default value for each variable and the setting it must produce.
OVERRIDES: list[tuple[str, str, str, Any]] = [
    ("AMQP_URL", "amqp_url", "amqp://bot:pw@rabbit:5673/vh", "amqp://bot:pw@rabbit:5673/vh"),
    ("REDIS_URL", "redis_url", "redis://redis:6380/2", "redis://redis:6380/2"),
    ("OPENAI_API_KEY", "openai_api_key", "sk-test", "sk-test"),
    ("OPENAI_BASE_URL", "openai_base_url", "http://ollama:11434/v1", "http://ollama:11434/v1"),
    ("OPENAI_MODEL", "openai_model", "llama3.1", "llama3.1"),
    ("OPENAI_TIMEOUT_MS", "openai_timeout_ms", "1500", 1500),
    ("LLM_BOT_API", "api", "responses", "responses"),
    (
        "LLM_BOT_SYSTEM_PROMPT",
        "system_prompt",
        "You are a shop assistant.",
        "You are a shop assistant.",
    ),
    ("LLM_BOT_MEMORY_MAX_MESSAGES", "memory_max_messages", "12", 12),
    ("LLM_BOT_MEMORY_MAX_CHARS", "memory_max_chars", "4000", 4000),
    ("LLM_BOT_MEMORY_TTL_SECONDS", "memory_ttl_seconds", "60", 60),
    ("LLM_BOT_PREFETCH", "prefetch", "4", 4),
    ("LLM_BOT_MAX_ATTEMPTS", "max_attempts", "3", 3),
    ("LLM_BOT_MAX_BODY_BYTES", "max_body_bytes", "65536", 65536),
    ("LLM_BOT_HTTP_PORT", "http_port", "9000", 9000),
    ("LLM_BOT_IMPORTANCE_THRESHOLD", "importance_threshold", "0.7", 0.7),
    ("LLM_BOT_LTM_MAX_ITEMS", "ltm_max_items", "50", 50),
    ("LLM_BOT_LTM_RETENTION_DAYS", "ltm_retention_days", "30", 30),
    ("LLM_BOT_LOG_LEVEL", "log_level", "DEBUG", "debug"),
    ("LLM_BOT_LOG_FORMAT", "log_format", "console", "console"),
    ("LLM_BOT_LOG_CONTENT", "log_content", "true", True),
    ("LLM_BOT_SHUTDOWN_GRACE_SECONDS", "shutdown_grace_seconds", "5", 5.0),
    ("LLM_BOT_INGRESS_EXCHANGE", "ingress_exchange", "chat", "chat"),
    ("LLM_BOT_INGRESS_ROUTING_KEY", "ingress_routing_key", "chat.bot.v1", "chat.bot.v1"),
    ("LLM_BOT_INGRESS_QUEUE", "ingress_queue", "bot.in", "bot.in"),
    ("LLM_BOT_CANDIDATE_ROUTING_KEY", "candidate_routing_key", "chat.out.v1", "chat.out.v1"),
    ("LLM_BOT_ERROR_ROUTING_KEY", "error_routing_key", "chat.err.v1", "chat.err.v1"),
    ("LLM_BOT_DLX", "dlx", "chat.dlx", "chat.dlx"),
    ("LLM_BOT_DLQ", "dlq", "bot.in.dlq", "bot.in.dlq"),
]

SPEC_VARIABLES = [variable for variable, _, _ in SPEC_DEFAULTS]


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer .env file and no variable of the table leaks into a test."""
    monkeypatch.chdir(tmp_path)
    for variable in SPEC_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
        monkeypatch.delenv(variable.lower(), raising=False)


def value_of(settings: Settings, setting: str) -> Any:
    value = getattr(settings, setting)
    return value.get_secret_value() if isinstance(value, SecretStr) else value


def configuration_error(monkeypatch: pytest.MonkeyPatch, **env: str) -> str:
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    with pytest.raises(ConfigurationError) as caught:
        load_settings()
    return str(caught.value)


def test_every_spec_variable_is_covered() -> None:
    """The test tables list each SPEC variable once and agree with each other."""
    assert len(set(SPEC_VARIABLES)) == len(SPEC_VARIABLES)
    assert [variable for variable, *_ in OVERRIDES] == SPEC_VARIABLES


@pytest.mark.parametrize(("variable", "setting", "default"), SPEC_DEFAULTS)
def test_defaults_match_the_spec(variable: str, setting: str, default: Any) -> None:
    """With no environment and no .env file, each setting has its SPEC section 7 default."""
    assert value_of(load_settings(), setting) == default, variable


def test_openai_timeout_in_seconds() -> None:
    """The model timeout is also available in seconds for the SDK."""
    assert load_settings().openai_timeout_seconds == 30.0


@pytest.mark.parametrize(("variable", "setting", "raw", "expected"), OVERRIDES)
def test_each_variable_is_honoured(
    monkeypatch: pytest.MonkeyPatch, variable: str, setting: str, raw: str, expected: Any
) -> None:
    """Setting a SPEC variable in the environment changes its setting."""
    monkeypatch.setenv(variable, raw)

    assert value_of(load_settings(), setting) == expected


def test_dotenv_file_is_read(tmp_path: Path) -> None:
    """A .env file in the working directory supplies settings."""
    (tmp_path / ".env").write_text("LLM_BOT_PREFETCH=7\nOPENAI_MODEL=from-dotenv\n")

    settings = load_settings()

    assert (settings.prefetch, settings.openai_model) == (7, "from-dotenv")


def test_environment_wins_over_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A variable set in the environment overrides the same one in .env."""
    (tmp_path / ".env").write_text("LLM_BOT_PREFETCH=7\n")
    monkeypatch.setenv("LLM_BOT_PREFETCH", "9")

    assert load_settings().prefetch == 9


def test_blank_base_url_means_the_sdk_default(monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty OPENAI_BASE_URL is treated as unset."""
    monkeypatch.setenv("OPENAI_BASE_URL", "")

    assert load_settings().openai_base_url is None


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("LLM_BOT_PREFETCH", "abc"),
        ("LLM_BOT_PREFETCH", "0"),
        ("LLM_BOT_API", "foo"),
        ("LLM_BOT_MAX_ATTEMPTS", "0"),
        ("LLM_BOT_MAX_ATTEMPTS", "-1"),
        ("LLM_BOT_HTTP_PORT", "70000"),
        ("LLM_BOT_IMPORTANCE_THRESHOLD", "1.5"),
        ("LLM_BOT_LOG_LEVEL", "loud"),
        ("LLM_BOT_LOG_FORMAT", "xml"),
        ("LLM_BOT_LOG_CONTENT", "maybe"),
        ("LLM_BOT_MEMORY_MAX_MESSAGES", "1"),
        ("LLM_BOT_MAX_BODY_BYTES", "12"),
        ("OPENAI_TIMEOUT_MS", "fast"),
        ("LLM_BOT_INGRESS_QUEUE", ""),
        ("LLM_BOT_PREFETCH", "1\n2"),
    ],
)
def test_bad_value_is_one_line_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    """A bad value raises ConfigurationError whose str() is one line naming the variable."""
    message = configuration_error(monkeypatch, **{variable: value})

    assert "\n" not in message
    assert variable in message


def test_bad_value_error_is_not_a_validation_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    """The error reads as configuration, not as a pydantic dump."""
    message = configuration_error(monkeypatch, LLM_BOT_PREFETCH="abc")

    assert message.startswith("invalid configuration: LLM_BOT_PREFETCH")
    assert "pydantic" not in message


def test_amqp_password_is_not_in_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """The AMQP password never appears in a configuration error."""
    message = configuration_error(
        monkeypatch,
        AMQP_URL=f"amqp://bot:{PASSWORD}@rabbit:5672/",
        REDIS_URL=f"redis://:{PASSWORD}@redis:6379/0",
        OPENAI_API_KEY=PASSWORD,
        LLM_BOT_PREFETCH="abc",
    )

    assert PASSWORD not in message


def test_amqp_password_is_not_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    """repr() and str() of the settings hide the AMQP URL (and other secrets)."""
    monkeypatch.setenv("AMQP_URL", f"amqp://bot:{PASSWORD}@rabbit:5672/")
    monkeypatch.setenv("REDIS_URL", f"redis://:{PASSWORD}@redis:6379/0")
    monkeypatch.setenv("OPENAI_API_KEY", PASSWORD)

    settings = load_settings()

    assert settings.amqp_url.get_secret_value() == f"amqp://bot:{PASSWORD}@rabbit:5672/"
    assert PASSWORD not in repr(settings)
    assert PASSWORD not in str(settings)
    assert PASSWORD not in repr(settings.model_dump())


def test_settings_are_frozen() -> None:
    """Settings cannot be changed after start."""
    settings = load_settings()

    with pytest.raises(ValueError, match="frozen"):
        settings.prefetch = 1  # type: ignore[misc]


def test_the_dedupe_window_must_not_outlive_the_raw_trace(monkeypatch: pytest.MonkeyPatch) -> None:
    """Forgetting a conversation finds its processed records through the raw trace."""
    message = configuration_error(
        monkeypatch, LLM_BOT_RAW_TRACE_RETENTION_DAYS="1", LLM_BOT_DEDUPE_TTL_SECONDS="90000"
    )
    assert message.startswith("invalid configuration: LLM_BOT_DEDUPE_TTL_SECONDS")
    assert "LLM_BOT_RAW_TRACE_RETENTION_DAYS" in message
    monkeypatch.setenv("LLM_BOT_DEDUPE_TTL_SECONDS", "86400")
    assert load_settings().dedupe_ttl_seconds == 86400
