"""The scope of a conversation's memory: tenant, user and conversation."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ConversationKey:
    """Tenant + user + conversation: the scope of working memory (ids already validated)."""

    tenant_id: str
    user_id: str
    conversation_id: str
