"""Who a gateway request is, checked before anything else is read: failed-authentication
throttling (``llm_bot.auth_throttle``), the bearer credential (``credentials.py``) and the
key's requests per minute (``request_limits.py``), on every authenticated path."""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import Request

from llm_bot.auth_throttle import AuthThrottle
from llm_bot.gateway.caller import Caller
from llm_bot.gateway.credentials import Credentials, bearer_credential
from llm_bot.gateway.openai_wire import WireError
from llm_bot.gateway.request_limits import RequestLimits


@dataclass(frozen=True)
class Door:
    """What the door checks a request against."""

    credentials: Credentials
    limits: RequestLimits
    throttle: AuthThrottle


def authenticated(request: Request, door: Door) -> Caller:
    """The caller of a request on an authenticated path, its attempt counted against the
    key's requests per minute (by the key's identity, never the header's spelling); a 401
    or 429 ``WireError`` otherwise. A client address or key prefix that failed too often
    is refused with 429 (``llm_bot.auth_throttle``): a locked address before its key is
    checked, a locked prefix only for a wrong key."""
    address = request.client.host if request.client is not None else ""
    wait = door.throttle.address_locked(address)
    if wait is not None:
        raise _throttled(wait)
    header = request.headers.get("authorization", "")
    try:
        caller = door.credentials.caller(header)
    except WireError:
        wait = door.throttle.failed(address, _presented(header))
        if wait is not None:
            raise _throttled(wait) from None
        raise
    door.limits.attempt(caller.identity)
    return caller


def _presented(authorization: str) -> str:
    """The credential of a well-formed header, else nothing (what its prefix scope is)."""
    try:
        return bearer_credential(authorization)
    except WireError:
        return ""


def _throttled(retry_after: int) -> WireError:
    return WireError(
        429,
        f"too many failed authentications from this client or for this key; retry after "
        f"{retry_after} s",
        code="rate_limit_exceeded",
        kind="requests",
        retry_after=retry_after,
    )
