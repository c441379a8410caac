"""Embeddings from an OpenAI-compatible ``/embeddings`` endpoint through the openai SDK
(``LLM_BOT_EMBEDDINGS=openai``; OpenAI, OpenRouter, Ollama, vLLM...)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import openai
from openai import AsyncOpenAI

from llm_bot.adapters.model_rate_limit import ModelRateLimiter
from llm_bot.errors import EmbeddingUnavailable, ModelRejected
from llm_bot.ports import EmbeddingPurpose, Matrix, ModelSpending

BATCH = 256
"""Inputs per request (OpenAI accepts up to 2,048)."""


class OpenAIEmbedder:
    """The ``Embedder`` port over the openai SDK. ``dimensions`` is sent when set (the
    text-embedding-3 models shorten their vectors); the dimension is otherwise learnt from
    the first answer."""

    def __init__(
        self,
        *,
        client: AsyncOpenAI,
        model: str,
        dimensions: int | None,
        limiter: ModelRateLimiter,
        spending: ModelSpending | None = None,
    ) -> None:
        """``limiter``: the process's model rate limiter (a 429 pauses chat calls too).
        ``spending``: told each batch's usage, counted against the tenant's token budget
        (never refused: a query or an index entry without its embedding helps nobody, and
        the tenant's next model call is refused anyway)."""
        self._limiter = limiter
        self._spending = spending
        self._client = client
        self._model = model
        self._dimensions = dimensions
        self._seen: int | None = dimensions

    @property
    def name(self) -> str:
        return f"openai:{self._model}" + (f":{self._dimensions}" if self._dimensions else "")

    @property
    def dimension(self) -> int:
        return self._seen or 0

    async def aclose(self) -> None:
        await self._client.close()

    async def embed(self, texts: Sequence[str], *, purpose: EmbeddingPurpose) -> Matrix:
        if purpose == "across":  # one model for every script: the query's own embedding
            return np.zeros((len(texts), self.dimension), dtype=np.float32)
        rows: list[Matrix] = []
        for start in range(0, len(texts), BATCH):
            rows.append(await self._batch(texts[start : start + BATCH]))
        if not rows:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.vstack(rows)

    async def _batch(self, texts: Sequence[str]) -> Matrix:
        dimensions = self._dimensions or openai.omit
        try:
            reply = await self._limiter.run(
                "embeddings",
                lambda: self._client.embeddings.create(
                    model=self._model, input=list(texts), dimensions=dimensions
                ),
                tokens=1 + sum(len(t) for t in texts) // 4,
            )
        except ModelRejected as exc:
            raise EmbeddingUnavailable(str(exc)) from exc
        except (openai.APIError, ValueError) as exc:
            raise EmbeddingUnavailable(f"embeddings request failed: {type(exc).__name__}") from exc
        if self._spending is not None and reply.usage is not None:
            await self._spending.after_call(reply.usage.total_tokens)
        ordered = sorted(reply.data, key=lambda item: item.index)
        matrix = np.asarray([item.embedding for item in ordered], dtype=np.float32)
        if matrix.shape[0] != len(texts):
            raise EmbeddingUnavailable("embeddings reply has the wrong number of vectors")
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        self._seen = matrix.shape[1]
        return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)
