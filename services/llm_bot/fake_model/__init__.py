"""Fake OpenAI-compatible HTTP server owned by the project, for tests and ``llm-bot demo``.

Usage::

    async with FakeModelServer() as server:
        server.script("first reply", Fault.status(429), Fault.hang())
        client = AsyncOpenAI(base_url=server.base_url, api_key="any", max_retries=0)
        ...

With no script step queued, replies come from the responder; the default responder answers
``"echo: " + <last user message text>[:200]`` (``"echo: "`` when there is no user message).
Token usage is estimated as ``ceil(characters / 4)`` (minimum 1) and embeddings are
deterministic L2-normalised hashed bags of words (64 dimensions unless ``dimensions`` is sent).
"""

from llm_bot.fake_model.responses import (
    DEFAULT_EMBEDDING_DIMENSIONS,
    DEFAULT_MODEL,
    embed_text,
    estimate_tokens,
)
from llm_bot.fake_model.scripts import (
    Fault,
    RecordedRequest,
    Responder,
    ToolCalls,
    default_responder,
)
from llm_bot.fake_model.server import (
    CHAT_PATH,
    EMBEDDINGS_PATH,
    RESPONSES_PATH,
    FakeModelServer,
    run_forever,
)

__all__ = [
    "CHAT_PATH",
    "DEFAULT_EMBEDDING_DIMENSIONS",
    "DEFAULT_MODEL",
    "EMBEDDINGS_PATH",
    "RESPONSES_PATH",
    "FakeModelServer",
    "Fault",
    "RecordedRequest",
    "Responder",
    "ToolCalls",
    "default_responder",
    "embed_text",
    "estimate_tokens",
    "run_forever",
]
