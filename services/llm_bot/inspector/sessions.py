"""Login sessions: a random session id in an ``HttpOnly``, ``SameSite=Strict`` cookie, the
scope it was opened with kept in this process (a restart logs everyone out), and a CSRF
token per session that every POST must carry (a form field, compared in constant time)."""

from __future__ import annotations

import hmac
import secrets
import time
from dataclasses import dataclass, field

from llm_bot.inspector.access_keys import Scope

COOKIE = "llmbot_inspector"
SESSION_SECONDS = 8 * 3600


@dataclass(frozen=True)
class Session:
    scope: Scope
    csrf: str
    expires_at: float

    def csrf_matches(self, presented: str | None) -> bool:
        return presented is not None and hmac.compare_digest(presented, self.csrf)


@dataclass
class Sessions:
    ttl_seconds: float = SESSION_SECONDS
    _open: dict[str, Session] = field(default_factory=dict)

    def open(self, scope: Scope) -> str:
        """A new session for ``scope``; returns its id (the cookie's value)."""
        self._expire()
        session_id = secrets.token_urlsafe(32)
        csrf = secrets.token_urlsafe(32)
        self._open[session_id] = Session(scope, csrf, time.monotonic() + self.ttl_seconds)
        return session_id

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        session = self._open.get(session_id)
        if session is None or session.expires_at < time.monotonic():
            self._open.pop(session_id, None)
            return None
        return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            self._open.pop(session_id, None)

    def _expire(self) -> None:
        now = time.monotonic()
        for session_id in [s for s, v in self._open.items() if v.expires_at < now]:
            del self._open[session_id]
