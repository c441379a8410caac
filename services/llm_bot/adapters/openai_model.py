"""The ``ChatModel`` port on any OpenAI-compatible endpoint, through the openai SDK.

Chat Completions by default; with ``LLM_BOT_API=responses`` the Responses API, where the
messages are flattened into ``(role) content`` blocks separated by blank lines (SPEC 5.2),
or, in a turn with tools, sent as input items (``function_call``/``function_call_output``).
The SDK's own retries are off: retries are the service's decision (``LLM_BOT_MAX_ATTEMPTS``),
and a ``429`` is the process's rate limiter's (``model_rate_limit.py``): a pause, not an
attempt.
With an ``on_delta`` sink the reply is streamed (``stream=True`` on either API) and each text
piece is handed to the sink as it arrives; the reply returned is the same either way.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Literal, cast
from urllib.parse import urlsplit

import aiohttp
import httpx2
import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion, ChatCompletionMessageFunctionToolCall
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseTextDeltaEvent,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode, Tracer

from llm_bot.adapters.model_rate_limit import ModelRateLimiter
from llm_bot.errors import ModelRejected, ModelTimeout, ModelUnavailable
from llm_bot.memory.messages import PromptMessage, ToolCall
from llm_bot.ports import DeltaSink, ModelReply, ModelSpending, ToolSpec
from llm_bot.telemetry.metrics import Metrics

RETRYABLE_STATUS = frozenset({408, 409, 429})
DEFAULT_RATE_LIMIT_WAIT_SECONDS = 300.0


def estimated_tokens(messages: Sequence[PromptMessage]) -> int:
    """A request's size for a tokens-per-minute limit (about four characters a token)."""
    return 1 + sum(len(str(m.get("content") or "")) for m in messages) // 4


def flatten_for_responses(messages: Sequence[PromptMessage]) -> str:
    """``(role) content`` blocks separated by blank lines."""
    return "\n\n".join(f"({m['role']}) {m.get('content') or ''}" for m in messages)


def responses_tool(tool: ToolSpec) -> dict[str, Any]:
    """A Chat Completions tool definition in the Responses API's flat shape."""
    function = tool.get("function", {})
    return {"type": "function", **function}


def responses_items(messages: Sequence[PromptMessage]) -> list[dict[str, Any]]:
    """The context as Responses API input items, for turns with tools: messages keep their
    role, an assistant's tool calls become ``function_call`` items and tool results
    ``function_call_output`` items (matched by ``call_id``)."""
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": message.get("tool_call_id", ""),
                    "output": message.get("content") or "",
                }
            )
            continue
        if message.get("content"):
            items.append({"type": "message", "role": role, "content": message["content"]})
        for call in message.get("tool_calls") or ():
            function = call.get("function", {})
            items.append(
                {
                    "type": "function_call",
                    "call_id": call.get("id", ""),
                    "name": function.get("name", ""),
                    "arguments": function.get("arguments", "{}"),
                }
            )
    return items


class OpenAIChatModel:
    """Calls Chat Completions or the Responses API with ``AsyncOpenAI``."""

    def __init__(
        self,
        *,
        client: AsyncOpenAI,
        model: str,
        tracer: Tracer,
        metrics: Metrics,
        api: Literal["chat", "responses"] = "chat",
        provider_name: str = "openai",
        send_cache_key: bool = True,
        limiter: ModelRateLimiter | None = None,
        spending: ModelSpending | None = None,
    ) -> None:
        """``limiter``: the process's (shared with its embedder and other models); a
        private one with the default wait budget when None. ``spending``: the tenants'
        token budgets, asked before each call and told its usage after (None: no budgets)."""
        self._limiter = limiter or ModelRateLimiter(
            max_wait_seconds=DEFAULT_RATE_LIMIT_WAIT_SECONDS, metrics=metrics
        )
        self._client = client
        self._model = model
        self._api = api
        self._tracer = tracer
        self._metrics = metrics
        self._provider = provider_name
        self._send_cache_key = send_cache_key
        self._spending = spending
        url = urlsplit(str(client.base_url))
        self._server = (url.hostname or "", url.port or (443 if url.scheme == "https" else 80))
        self._others: dict[str, OpenAIChatModel] = {}

    def _with_model(self, model: str) -> OpenAIChatModel:
        """The same client and settings for another model (a persona's), made once."""
        other = self._others.get(model)
        if other is None:
            other = OpenAIChatModel(
                client=self._client,
                model=model,
                tracer=self._tracer,
                metrics=self._metrics,
                api=self._api,
                provider_name=self._provider,
                send_cache_key=self._send_cache_key,
                limiter=self._limiter,
                spending=self._spending,
            )
            self._others[model] = other
        return other

    @property
    def model(self) -> str:
        return self._model

    async def complete_json(
        self,
        messages: Sequence[PromptMessage],
        *,
        schema_name: str,
        schema: dict[str, Any],
        conversation_id: str | None = None,
    ) -> ModelReply:
        """Structured output: the reply text is JSON for ``schema`` (strict mode)."""
        return await self.complete(
            messages, conversation_id=conversation_id, json_schema=(schema_name, schema)
        )

    async def complete(
        self,
        messages: Sequence[PromptMessage],
        *,
        conversation_id: str | None = None,
        json_schema: tuple[str, dict[str, Any]] | None = None,
        cache_key: str | None = None,
        tools: Sequence[ToolSpec] = (),
        on_delta: DeltaSink | None = None,
        model: str | None = None,
    ) -> ModelReply:
        """One model request in a CLIENT span ``chat {model}`` (GenAI conventions).
        ``cache_key`` is sent as ``prompt_cache_key`` unless configured off; with
        ``on_delta`` the reply streams; ``model`` asks another model than the configured
        one."""
        if model is not None and model != self._model:
            return await self._with_model(model).complete(
                messages,
                conversation_id=conversation_id,
                json_schema=json_schema,
                cache_key=cache_key,
                tools=tools,
                on_delta=on_delta,
            )
        attributes: dict[str, str | int] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": self._provider,
            "gen_ai.request.model": self._model,
            "server.address": self._server[0],
            "server.port": self._server[1],
        }
        if conversation_id:
            attributes["gen_ai.conversation.id"] = conversation_id
        if tools:
            attributes["llmbot.tools.offered"] = len(tools)
        if on_delta is not None:
            attributes["gen_ai.request.stream"] = True
        if self._spending is not None:  # BudgetExceeded: the tenant's budget is spent
            await self._spending.before_call()
        started = time.perf_counter()
        with self._tracer.start_as_current_span(
            f"chat {self._model}",
            kind=SpanKind.CLIENT,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                key = cache_key if self._send_cache_key else None
                reply = await self._call(messages, json_schema, key, tools, on_delta)
            except Exception as exc:
                self._metrics.model_request(
                    api=self._api, ok=False, seconds=time.perf_counter() - started
                )
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
                span.set_attribute("error.type", type(exc).__name__)
                raise
            _record_usage(span, reply)
            self._metrics.model_request(
                api=self._api,
                ok=True,
                seconds=time.perf_counter() - started,
                input_tokens=reply.input_tokens,
                output_tokens=reply.output_tokens,
                cached_input_tokens=reply.cached_input_tokens,
            )
            if self._spending is not None:
                await self._spending.after_call(reply.input_tokens + reply.output_tokens)
            return reply

    async def _call(
        self,
        messages: Sequence[PromptMessage],
        json_schema: tuple[str, dict[str, Any]] | None,
        cache_key: str | None,
        tools: Sequence[ToolSpec],
        on_delta: DeltaSink | None,
    ) -> ModelReply:
        extra: dict[str, Any] = {"prompt_cache_key": cache_key} if cache_key else {}
        if tools:
            extra["tools"] = (
                [responses_tool(tool) for tool in tools]
                if self._api == "responses"
                else list(tools)
            )
        try:
            return await self._limiter.run(
                self._api,
                lambda: self._send(messages, json_schema, extra, on_delta),
                tokens=estimated_tokens(messages),
            )
        except openai.APITimeoutError as exc:
            if _refused(exc):
                raise ModelUnavailable("model endpoint unreachable") from exc
            raise ModelTimeout("model request timed out") from exc
        except openai.APIConnectionError as exc:
            raise ModelUnavailable("model endpoint unreachable") from exc
        except openai.APIStatusError as exc:  # the provider's text: logs only, redacted
            status = f"model returned HTTP {exc.status_code}"
            if exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500:
                raise ModelUnavailable(status, detail=exc.message) from exc
            raise ModelRejected(status, detail=exc.message) from exc
        except openai.APIError as exc:  # an error event inside a stream: its text too
            raise ModelUnavailable("model stream failed", detail=exc.message) from exc
        except (aiohttp.ClientError, httpx2.HTTPError) as exc:  # a stream that broke off
            raise ModelUnavailable(f"model stream broke off ({type(exc).__name__})") from exc

    async def _send(
        self,
        messages: Sequence[PromptMessage],
        json_schema: tuple[str, dict[str, Any]] | None,
        extra: dict[str, Any],
        on_delta: DeltaSink | None,
    ) -> ModelReply:
        if self._api == "responses":
            return await self._responses(messages, json_schema, extra, on_delta)
        if on_delta is not None:
            return await self._chat_stream(messages, extra, on_delta)
        return await self._chat(messages, json_schema, extra)

    async def _chat(
        self,
        messages: Sequence[PromptMessage],
        json_schema: tuple[str, dict[str, Any]] | None,
        extra: dict[str, Any],
    ) -> ModelReply:
        if json_schema is not None:
            name, schema = json_schema
            extra["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": True},
            }
        # The SDK's low-level ``post`` (same HTTP client, timeouts, error mapping and typed
        # response) without ``create``'s recursive parameter transform, which costs ~13% of
        # the service's CPU per event and does nothing to messages that are plain dicts.
        response = await self._client.post(
            "/chat/completions",
            body={"model": self._model, "messages": list(messages), **extra},
            cast_to=ChatCompletion,
        )
        if not response.choices:
            raise ModelUnavailable("model returned no choices")
        usage = response.usage
        details = usage.prompt_tokens_details if usage else None
        message = response.choices[0].message
        calls = tuple(
            ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments)
            for call in message.tool_calls or ()
            if isinstance(call, ChatCompletionMessageFunctionToolCall)
        )
        return ModelReply(
            text=message.content or "",
            tool_calls=calls,
            model=response.model or self._model,
            input_tokens=usage.prompt_tokens if usage else 0,
            output_tokens=usage.completion_tokens if usage else 0,
            cached_input_tokens=(details.cached_tokens or 0) if details else 0,
        )

    async def _chat_stream(
        self, messages: Sequence[PromptMessage], extra: dict[str, Any], on_delta: DeltaSink
    ) -> ModelReply:
        """Chat Completions with ``stream=True``: text pieces go to ``on_delta``; tool calls
        are assembled from their fragments; usage comes in the last chunk. Chunks are read
        as plain dicts: building the SDK's chunk models cost ~0.1 ms each, the larger part
        of streaming's CPU per piece (the SDK still raises on error events)."""
        stream = await self._client.post(
            "/chat/completions",
            body={
                "model": self._model,
                "messages": list(messages),
                "stream": True,
                "stream_options": {"include_usage": True},
                **extra,
            },
            cast_to=ChatCompletion,
            stream=True,
            stream_cls=AsyncStream[dict[str, Any]],
        )
        text: list[str] = []
        calls: dict[int, list[str]] = {}
        model, usage = self._model, None
        async with stream:
            async for chunk in stream:
                model = chunk.get("model") or model
                usage = chunk.get("usage") or usage
                for choice in (chunk.get("choices") or ())[:1]:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        text.append(delta["content"])
                        await on_delta(delta["content"])
                    for call in delta.get("tool_calls") or ():
                        parts = calls.setdefault(int(call.get("index") or 0), ["", "", ""])
                        function = call.get("function") or {}
                        parts[0] = call.get("id") or parts[0]
                        parts[1] += function.get("name") or ""
                        parts[2] += function.get("arguments") or ""
        used = usage or {}
        details = used.get("prompt_tokens_details") or {}
        return ModelReply(
            text="".join(text),
            tool_calls=tuple(ToolCall(id=i, name=n, arguments=a) for i, n, a in calls.values()),
            model=model,
            input_tokens=int(used.get("prompt_tokens") or 0),
            output_tokens=int(used.get("completion_tokens") or 0),
            cached_input_tokens=int(details.get("cached_tokens") or 0),
        )

    async def _responses(
        self,
        messages: Sequence[PromptMessage],
        json_schema: tuple[str, dict[str, Any]] | None,
        extra: dict[str, Any],
        on_delta: DeltaSink | None,
    ) -> ModelReply:
        if json_schema is not None:
            name, schema = json_schema
            extra["text"] = {
                "format": {"type": "json_schema", "name": name, "schema": schema, "strict": True}
            }
        tooled = "tools" in extra or any(
            m.get("tool_calls") or m.get("role") == "tool" for m in messages
        )
        model_input = cast(
            "Any", responses_items(messages) if tooled else flatten_for_responses(messages)
        )  # plain dicts of the documented item shapes; the SDK's union is a TypedDict zoo
        if on_delta is None:
            response = await self._client.responses.create(
                model=self._model, input=model_input, **extra
            )
        else:
            response = await self._responses_stream(model_input, extra, on_delta)
        usage = response.usage
        details = usage.input_tokens_details if usage else None
        calls = tuple(
            ToolCall(id=item.call_id, name=item.name, arguments=item.arguments)
            for item in response.output
            if isinstance(item, ResponseFunctionToolCall)
        )
        return ModelReply(
            text=response.output_text,
            tool_calls=calls,
            model=response.model or self._model,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            cached_input_tokens=(details.cached_tokens or 0) if details else 0,
        )

    async def _responses_stream(
        self, model_input: Any, extra: dict[str, Any], on_delta: DeltaSink
    ) -> Response:
        """The Responses API with ``stream=True``: text deltas go to ``on_delta``; the
        ``response.completed`` event carries the whole response."""
        stream = await self._client.responses.create(
            model=self._model, input=model_input, stream=True, **extra
        )
        async with stream:
            async for event in stream:
                if isinstance(event, ResponseTextDeltaEvent):
                    await on_delta(event.delta)
                elif isinstance(event, ResponseCompletedEvent):
                    return event.response
                elif event.type in ("response.failed", "response.incomplete", "error"):
                    raise ModelUnavailable(f"model stream ended with {event.type}")
        raise ModelUnavailable("model stream ended without response.completed")


def _refused(exc: BaseException) -> bool:
    """Whether a timeout the SDK reports is really a refused or failed connect: the aiohttp
    transport maps every ``ClientConnectionError`` to a connect timeout, httpx does not."""
    cause = exc.__cause__ or exc.__context__
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectorError):
            return True
        cause = cause.__cause__ or cause.__context__
    return False


def _record_usage(span: Span, reply: ModelReply) -> None:
    span.set_attribute("gen_ai.response.model", reply.model)
    span.set_attribute("gen_ai.usage.input_tokens", reply.input_tokens)
    span.set_attribute("gen_ai.usage.output_tokens", reply.output_tokens)
    span.set_attribute("gen_ai.usage.cache_read.input_tokens", reply.cached_input_tokens)
    span.set_attribute(
        "gen_ai.response.finish_reasons", ["tool_calls"] if reply.tool_calls else ["stop"]
    )
    if reply.tool_calls:
        span.set_attribute("llmbot.tool_calls", [call.name for call in reply.tool_calls])
