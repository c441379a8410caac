"""``LLM_BOT_INSPECTOR_KEYS`` parsing (``inspector/access_keys.py``): ``scope=sha256:<hex>``
entries, a tenant id or ``*`` as scope, a presented key matched by its digest only."""

from __future__ import annotations

import hashlib

import pytest

from llm_bot.inspector.access_keys import ALL_TENANTS, InspectorKeys, Scope, key_digest


def test_a_key_opens_the_scope_of_its_digest() -> None:
    """Each key finds its own entry's scope; an unknown key, or a digest presented as the
    key, finds none."""
    keys = InspectorKeys.parse(f"*={key_digest('admin')}, store_1={key_digest('shop')}")
    admin, shop = keys.scope_for("admin"), keys.scope_for("shop")
    assert admin is not None
    assert shop is not None
    assert (admin.tenant, shop.tenant) == (ALL_TENANTS, "store_1")
    assert keys.scope_for("nope") is None
    assert keys.scope_for(key_digest("shop")) is None
    assert keys.scope_for("") is None


def test_the_scope_is_named_by_tenant_and_digest_prefix_never_the_key() -> None:
    """Audit events name a key ``scope:<first 8 hex digits>``."""
    digest = hashlib.sha256(b"shop").hexdigest()
    [(scope, stored)] = InspectorKeys.parse(f"store_1=sha256:{digest}").entries
    assert scope == Scope("store_1", f"store_1:{digest[:8]}")
    assert stored == bytes.fromhex(digest)
    assert "shop" not in scope.name.replace("store_1", "")


def test_a_tenant_scope_allows_its_tenant_only_and_star_allows_all() -> None:
    """``allows``: one tenant, or every tenant for ``*``."""
    assert Scope("a", "a:0").allows("a")
    assert not Scope("a", "a:0").allows("b")
    assert Scope(ALL_TENANTS, "*:0").allows("anything")


def test_blank_entries_are_skipped_and_nothing_configured_is_falsy() -> None:
    """An empty setting (or only commas and spaces) configures no key."""
    assert not InspectorKeys.parse("")
    assert not InspectorKeys.parse(" , ,")
    assert InspectorKeys.parse(f" ,a={key_digest('k')}, ")


@pytest.mark.parametrize(
    ("text", "position"),
    [
        ("a=sha256:abc", 1),  # too short
        (f"a={key_digest('k')},b=md5:{'0' * 64}", 2),  # another hash
        (f"a={key_digest('k').upper()}", 1),  # uppercase hex and prefix
        (f"={key_digest('k')}", 1),  # no scope
        (key_digest("k"), 1),  # no scope at all
        (f"a = {key_digest('k')}", 1),  # spaces inside the entry
    ],
)
def test_a_malformed_entry_is_refused_naming_its_position(text: str, position: int) -> None:
    """The error says which entry, and how to make a good one; it never echoes the entry."""
    with pytest.raises(ValueError, match=f"entry {position} is not scope=sha256") as error:
        InspectorKeys.parse(text)
    assert "hash-key" in str(error.value)


@pytest.mark.parametrize("scope", ["bad|id", "-leading", "x" * 129, "tenant/one"])
def test_a_scope_that_is_not_a_tenant_id_is_refused(scope: str) -> None:
    """A scope must match the id pattern (or be ``*``)."""
    with pytest.raises(ValueError, match="is not a tenant id or"):
        InspectorKeys.parse(f"{scope}={key_digest('k')}")
