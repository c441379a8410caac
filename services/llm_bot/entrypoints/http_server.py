"""The operator's HTTP endpoints on ``LLM_BOT_HTTP_PORT``: ``/metrics``, ``/healthz``,
``/readyz``.

``/healthz`` answers while the process's event loop runs. ``/readyz`` answers 200 only when
every readiness check passes (connected to the broker and consuming, Redis answering) and
503 with the reasons otherwise, so an orchestrator stops routing work to a replica that
is reconnecting.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from llm_bot.errors import DependencyUnavailable

ReadinessCheck = Callable[[], Awaitable[str | None]]
"""Returns None when ready, else a short reason."""

CHECK_TIMEOUT_SECONDS = 2.0


class HealthServer:
    """A small aiohttp server; metrics join it later on the same port."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        checks: Mapping[str, ReadinessCheck],
        registry: CollectorRegistry | None = None,
    ) -> None:
        self._host = host
        self._port = port
        self._checks = dict(checks)
        self._registry = registry
        self._runner: web.AppRunner | None = None

    @property
    def port(self) -> int:
        """The bound port (useful when started with port 0)."""
        if self._runner is None or not self._runner.addresses:
            return self._port
        return int(self._runner.addresses[0][1])

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        if self._registry is not None:
            app.router.add_get("/metrics", self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, self._host, self._port).start()
        except OSError as exc:
            await self._runner.cleanup()
            raise DependencyUnavailable(
                f"cannot listen on {self._host}:{self._port} for /healthz, /readyz and /metrics "
                f"({exc.strerror or exc}); another llm-bot may be running there: stop it or "
                "set LLM_BOT_HTTP_PORT (0 picks a free port)"
            ) from exc

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _metrics(self, _: web.Request) -> web.Response:
        assert self._registry is not None  # noqa: S101  # the route exists only with a registry
        return web.Response(
            body=generate_latest(self._registry), headers={"Content-Type": CONTENT_TYPE_LATEST}
        )

    async def _healthz(self, _: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def _readyz(self, _: web.Request) -> web.Response:
        failures = {
            name: reason
            for name, reason in zip(
                self._checks,
                await asyncio.gather(*(_run(check) for check in self._checks.values())),
                strict=True,
            )
            if reason is not None
        }
        if failures:
            return web.json_response({"status": "not ready", "checks": failures}, status=503)
        return web.json_response({"status": "ready"})


async def _run(check: ReadinessCheck) -> str | None:
    try:
        async with asyncio.timeout(CHECK_TIMEOUT_SECONDS):
            return await check()
    except TimeoutError:
        return "check timed out"
    except Exception as exc:  # noqa: BLE001  # a failing check means "not ready", never a 500
        return f"check failed: {type(exc).__name__}"
