"""The service's settings: the variables (``fields.py``) and the groups built from them
(``groups.py``, ``process_groups.py``), which are what modules take. Nothing reads the
environment at import time: the composition root calls :func:`load_settings` once.
"""

from __future__ import annotations

from llm_bot.config.fields import SettingsFields
from llm_bot.config.groups import (
    BrokerConfig,
    DeliveryConfig,
    FairnessConfig,
    LongTermConfig,
    MemoryConfig,
    ModelConfig,
    PersonaConfig,
    RateLimitConfig,
    RedisConfig,
    RetrievalConfig,
    ToolConfig,
)
from llm_bot.config.process_groups import (
    GatewayConfig,
    InspectorConfig,
    LoggingConfig,
    ProcessConfig,
)
from llm_bot.context_budget import ContextBudget
from llm_bot.token_budgets import TenantTokenBudgets


class Settings(SettingsFields):
    """Every setting of the service; the groups (``settings.broker``, ``settings.retrieval``,
    ...) are what modules take."""

    # The groups (``groups.py``, ``process_groups.py``): typed, frozen views of the variables above, built on
    # each access, so they follow a ``model_copy`` of the settings.

    @property
    def broker(self) -> BrokerConfig:
        return BrokerConfig.of(self)

    @property
    def redis(self) -> RedisConfig:
        return RedisConfig.of(self)

    @property
    def model(self) -> ModelConfig:
        return ModelConfig.of(self)

    @property
    def rate_limits(self) -> RateLimitConfig:
        return RateLimitConfig.of(self)

    @property
    def memory(self) -> MemoryConfig:
        return MemoryConfig.of(self)

    @property
    def long_term(self) -> LongTermConfig:
        return LongTermConfig.of(self)

    @property
    def retrieval(self) -> RetrievalConfig:
        return RetrievalConfig.of(self)

    @property
    def delivery(self) -> DeliveryConfig:
        return DeliveryConfig.of(self)

    @property
    def fairness(self) -> FairnessConfig:
        return FairnessConfig.of(self)

    @property
    def personas(self) -> PersonaConfig:
        return PersonaConfig.of(self)

    @property
    def tools(self) -> ToolConfig:
        return ToolConfig.of(self)

    @property
    def process(self) -> ProcessConfig:
        return ProcessConfig.of(self)

    @property
    def logging(self) -> LoggingConfig:
        return LoggingConfig.of(self)

    @property
    def gateway(self) -> GatewayConfig:
        return GatewayConfig.of(self)

    @property
    def inspector(self) -> InspectorConfig:
        return InspectorConfig.of(self)

    def token_budgets(self) -> TenantTokenBudgets:
        """``LLM_BOT_TENANT_TOKEN_BUDGETS``, parsed (``token_budgets.py``): read by ``run``,
        ``worker`` and ``gateway``."""
        return TenantTokenBudgets.parse(self.tenant_token_budgets)

    def context_budget(self) -> ContextBudget:
        """The model's (``settings.model.context_budget()``)."""
        return self.model.context_budget()

    @property
    def openai_timeout_seconds(self) -> float:
        return self.model.timeout_seconds
