"""Configuration: the environment variables, read and validated once at start, and the
groups the service reads them through.

- ``settings.py``: :class:`Settings`, one flat field per variable (the names are the
  contract, SPEC section 7), with their defaults and validation;
- ``loading.py``: :func:`load_settings` and the one-line :class:`ConfigurationError`;
- ``groups.py``: the typed, frozen groups per concern, properties of the settings
  (``settings.broker``, ``settings.redis``, ``settings.model``, ``settings.retrieval``, ...);
- ``process_groups.py``: the groups per process (``settings.process``, ``settings.logging``,
  ``settings.gateway``, ``settings.inspector``). A module takes the group(s) it uses; the composition root
  (``bootstrap``) and the entrypoints hand them out. docs/configuration.md "Settings groups"
  lists the groups, their variables and the processes that read them.
"""

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
from llm_bot.config.loading import ConfigurationError, load_settings
from llm_bot.config.process_groups import (
    GatewayConfig,
    InspectorConfig,
    LoggingConfig,
    ProcessConfig,
)
from llm_bot.config.settings import Settings
from llm_bot.config.tenant_weights import parse_tenant_weights

__all__ = [
    "BrokerConfig",
    "ConfigurationError",
    "DeliveryConfig",
    "FairnessConfig",
    "GatewayConfig",
    "InspectorConfig",
    "LoggingConfig",
    "LongTermConfig",
    "MemoryConfig",
    "ModelConfig",
    "PersonaConfig",
    "ProcessConfig",
    "RateLimitConfig",
    "RedisConfig",
    "RetrievalConfig",
    "Settings",
    "ToolConfig",
    "load_settings",
    "parse_tenant_weights",
]
