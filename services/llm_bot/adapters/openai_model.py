"""The ``ChatModel`` port on any OpenAI-compatible endpoint, through the openai SDK.

Chat Completions by default; with ``LLM_BOT_API=responses`` the Responses API, where the
messages are flattened into ``(role) content`` blocks separated by blank lines (SPEC 5.2).
The SDK's own retries are off: retries are the service's decision (``LLM_BOT_MAX_ATTEMPTS``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import openai
from openai import AsyncOpenAI

from llm_bot.errors import ModelRejected, ModelTimeout, ModelUnavailable
from llm_bot.ports import ModelReply, PromptMessage

RETRYABLE_STATUS = frozenset({408, 409, 429})


def flatten_for_responses(messages: Sequence[PromptMessage]) -> str:
    """``(role) content`` blocks separated by blank lines."""
    return "\n\n".join(f"({m['role']}) {m.get('content') or ''}" for m in messages)


class OpenAIChatModel:
    """Calls Chat Completions or the Responses API with ``AsyncOpenAI``."""

    def __init__(
        self,
        *,
        client: AsyncOpenAI,
        model: str,
        api: Literal["chat", "responses"] = "chat",
    ) -> None:
        self._client = client
        self._model = model
        self._api = api

    @property
    def model(self) -> str:
        return self._model

    async def complete(self, messages: Sequence[PromptMessage]) -> ModelReply:
        try:
            if self._api == "responses":
                return await self._responses(messages)
            return await self._chat(messages)
        except openai.APITimeoutError as exc:
            raise ModelTimeout("model request timed out") from exc
        except openai.APIConnectionError as exc:
            raise ModelUnavailable("model endpoint unreachable") from exc
        except openai.APIStatusError as exc:
            detail = f"model returned HTTP {exc.status_code}"
            if exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500:
                raise ModelUnavailable(detail) from exc
            raise ModelRejected(detail) from exc

    async def _chat(self, messages: Sequence[PromptMessage]) -> ModelReply:
        response = await self._client.chat.completions.create(
            model=self._model,
            messages=list(messages),  # type: ignore[arg-type]  # plain dicts in the SDK's shape
        )
        if not response.choices:
            raise ModelUnavailable("model returned no choices")
        usage = response.usage
        return ModelReply(
            text=response.choices[0].message.content or "",
            model=response.model or self._model,
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
        )

    async def _responses(self, messages: Sequence[PromptMessage]) -> ModelReply:
        response = await self._client.responses.create(
            model=self._model,
            input=flatten_for_responses(messages),
        )
        usage = response.usage
        return ModelReply(
            text=response.output_text,
            model=response.model or self._model,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
        )
