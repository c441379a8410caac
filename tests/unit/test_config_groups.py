"""The settings groups (``config/groups.py``, ``config/process_groups.py``): every variable in a group, the groups typed,
frozen and in step with the flat settings, and each one documented."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest

from llm_bot.config import Settings, load_settings

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cr3t-Pa55word"  # planted to check it is never shown

SHARED = {
    "prefetch": {"delivery", "fairness"},
    "auth_max_failures": {"gateway", "inspector"},
    "auth_failure_window_seconds": {"gateway", "inspector"},
    "auth_lockout_seconds": {"gateway", "inspector"},
}
"""Variables two groups read: the replica's slots are delivery's prefetch and what
fairness shares out."""
NOT_IN_A_GROUP = {"tenant_token_budgets"}
"""Read as one parsed value, ``settings.token_budgets()``."""


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No developer .env file and no configured variable leaks into a test."""
    monkeypatch.chdir(tmp_path)
    for name, info in Settings.model_fields.items():
        for variable in (name, *getattr(info.validation_alias, "choices", ())):
            monkeypatch.delenv(str(variable), raising=False)
            monkeypatch.delenv(str(variable).upper(), raising=False)


def group_names() -> list[str]:
    """The properties of ``Settings`` that are groups (frozen dataclasses)."""
    settings = load_settings()
    return [
        name
        for name, member in vars(Settings).items()
        if isinstance(member, property) and dataclasses.is_dataclass(getattr(settings, name))
    ]


def fields_read_by(group: str) -> set[str]:
    """The flat settings a group is built from (read through a recording stand-in)."""
    settings = load_settings()
    read: set[str] = set()

    class Recording:
        def __getattr__(self, name: str) -> Any:
            read.add(name)
            return getattr(settings, name)

    prop = vars(Settings)[group]
    assert isinstance(prop, property)
    assert prop.fget is not None
    prop.fget(Recording())
    return read


def test_every_variable_is_in_one_group() -> None:
    """Each variable is read by exactly one group (the listed exceptions aside)."""
    readers: dict[str, set[str]] = {}
    for group in group_names():
        for field in fields_read_by(group):
            readers.setdefault(field, set()).add(group)

    assert set(readers) | NOT_IN_A_GROUP == set(Settings.model_fields)
    assert {field: groups for field, groups in readers.items() if len(groups) > 1} == SHARED


def test_the_groups_are_the_expected_ones() -> None:
    """The groups per concern and per process that modules take."""
    assert sorted(group_names()) == sorted(
        [
            "broker",
            "redis",
            "model",
            "rate_limits",
            "memory",
            "long_term",
            "retrieval",
            "delivery",
            "fairness",
            "personas",
            "tools",
            "process",
            "logging",
            "gateway",
            "inspector",
        ]
    )


def test_a_group_carries_its_variables_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """A group's fields are the values of its environment variables, validated."""
    monkeypatch.setenv("LLM_BOT_INGRESS_QUEUE", "bot.in")
    monkeypatch.setenv("LLM_BOT_RETRIEVAL_MAX_TOKENS", "1200")
    monkeypatch.setenv("LLM_BOT_GATEWAY_MODELS", "bot-a, bot-b,")
    monkeypatch.setenv("LLM_BOT_TENANT_WEIGHTS", "gold=2")
    monkeypatch.setenv("OPENAI_TIMEOUT_MS", "1500")
    monkeypatch.setenv("LLM_BOT_INSPECTOR_PORT", "9000")

    settings = load_settings()

    assert settings.broker.ingress_queue == "bot.in"
    assert settings.retrieval.max_tokens == 1200
    assert settings.gateway.models == ("bot-a", "bot-b")
    assert settings.fairness.weights == {"gold": 2.0}
    assert settings.model.timeout_seconds == 1.5
    assert settings.inspector.port == 9000
    assert settings.model.context_budget() == settings.context_budget()


def test_groups_are_frozen() -> None:
    """A group cannot be changed after start, as the settings cannot."""
    settings = load_settings()

    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.delivery.prefetch = 1  # type: ignore[misc]


def test_groups_follow_a_copy_of_the_settings() -> None:
    """Groups are built on access: a ``model_copy`` with changes shows them."""
    settings = load_settings()

    copy = settings.model_copy(update={"dlq": "other.dlq", "prefetch": 4})

    assert (copy.broker.dlq, copy.delivery.prefetch, copy.fairness.tenant_share) == (
        "other.dlq",
        4,
        1,
    )
    assert settings.broker.dlq == "llm-bot.internal.llmbot.v1.dlq"


def test_secrets_are_not_in_a_groups_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    """repr() of a group hides the URLs' passwords and the keys, as the settings do."""
    monkeypatch.setenv("AMQP_URL", f"amqp://bot:{PASSWORD}@rabbit:5672/")
    monkeypatch.setenv("REDIS_URL", f"redis://:{PASSWORD}@redis:6379/0")
    monkeypatch.setenv("OPENAI_API_KEY", PASSWORD)
    monkeypatch.setenv("QDRANT_API_KEY", PASSWORD)

    settings = load_settings()

    for group in group_names():
        assert PASSWORD not in repr(getattr(settings, group)), group


def test_every_group_is_in_the_configuration_docs() -> None:
    """docs/configuration.md "Settings groups" has a row per group."""
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    section = text[text.index("\n## Settings groups\n") :]
    documented = set(re.findall(r"^\| `([a-z_]+)(?:\(\))?` \|", section, flags=re.MULTILINE))

    assert set(group_names()) | {"token_budgets"} == documented
