"""The gateway's access lists, parsed: ``LLM_BOT_GATEWAY_KEYS`` (API key digests),
``LLM_BOT_GATEWAY_TOKEN_SECRETS`` (user-token secrets) and
``LLM_BOT_GATEWAY_TENANT_PERSONAS`` (the personas a tenant may name).

Pure functions over the variables' text, below both their users: config's validators
check the lists at start, and ``gateway/api_keys.py``, ``gateway/user_tokens.py`` and
``gateway/tenant_personas.py`` build their objects from them. Each raises ``ValueError``
naming the bad entry (never a secret).
"""

from __future__ import annotations

import re

from llm_bot.contract.identifiers import ID_PATTERN

_KEY_ENTRY = re.compile(
    r"^(?P<tenant>[^=/\s]+)(?:/(?P<user>[^=/\s]+))?=sha256:(?P<digest>[0-9a-f]{64})$"
)
_PERSONA = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

MIN_SECRET_CHARS = 32
"""Of a user-token secret."""


def parse_key_entries(text: str) -> tuple[tuple[str, str | None, bytes], ...]:
    """``tenant[/user]=sha256:<hex>,...`` → (tenant, user or None, digest) per entry."""
    entries: list[tuple[str, str | None, bytes]] = []
    for position, raw in enumerate(text.split(","), start=1):
        item = raw.strip()
        if not item:
            continue
        match = _KEY_ENTRY.match(item)
        if match is None:
            raise ValueError(
                f"entry {position} is not tenant=sha256:<64 lowercase hex digits> or "
                "tenant/user=sha256:<...> (make one with: llm-bot gateway hash-key)"
            )
        for part in ("tenant", "user"):
            value = match[part]
            if value is not None and re.fullmatch(ID_PATTERN, value) is None:
                raise ValueError(f"entry {position}: {part} {value!r} is not a valid id")
        entries.append((match["tenant"], match["user"], bytes.fromhex(match["digest"])))
    return tuple(entries)


def parse_token_secrets(text: str) -> tuple[tuple[str, bytes], ...]:
    """``tenant=secret,...`` → (tenant, secret) per entry."""
    entries: list[tuple[str, bytes]] = []
    for position, raw in enumerate(text.split(","), start=1):
        item = raw.strip()
        if not item:
            continue
        tenant, sep, secret = item.partition("=")
        if not sep or re.fullmatch(ID_PATTERN, tenant) is None:
            raise ValueError(f"entry {position} is not tenant=secret with a valid tenant id")
        if len(secret) < MIN_SECRET_CHARS or re.search(r"\s", secret):
            raise ValueError(
                f"entry {position} ({tenant}): the secret must be at least "
                f"{MIN_SECRET_CHARS} characters without spaces (e.g. openssl rand -hex 32)"
            )
        entries.append((tenant, secret.encode()))
    return tuple(entries)


def parse_tenant_personas(text: str) -> dict[str, frozenset[str]]:
    """``tenant=a|b,...`` → the personas each listed tenant may name."""
    allowed: dict[str, frozenset[str]] = {}
    for position, raw in enumerate(text.split(","), start=1):
        item = raw.strip()
        if not item:
            continue
        tenant, sep, names = item.partition("=")
        tenant = tenant.strip()
        if not sep or re.fullmatch(ID_PATTERN, tenant) is None:
            raise ValueError(f"entry {position} is not tenant=persona|persona")
        personas = frozenset(name.strip() for name in names.split("|"))
        bad = sorted(name for name in personas if _PERSONA.fullmatch(name) is None)
        if bad:
            raise ValueError(f"entry {position} ({tenant}): {bad[0]!r} is not a persona name")
        if tenant in allowed:
            raise ValueError(f"entry {position}: tenant {tenant!r} is named twice")
        allowed[tenant] = personas
    return allowed
