"""The published contract in schemas/: JSON Schemas match the models, AsyncAPI matches SPEC 3."""

from __future__ import annotations

import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.contract.schema_export import SCHEMA_FILES, stale_schemas

REPO_ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = REPO_ROOT / "schemas"
ASYNCAPI = SCHEMAS / "asyncapi.yaml"

EXCHANGES = {"internal": "topic", "internal.dlx": "topic"}
ROUTING_KEYS = {
    "internal.llmbot.v1",
    "internal.candidate.v1",
    "internal.llmbot.error.v1",
    "internal.memory.v1",
    "internal.flow.result.v1",
}
QUEUES = {
    "llm-bot.internal.llmbot.v1",
    "llm-bot.internal.llmbot.v1.dlq",
    "llm-bot.memory.v1",
    "llm-bot.flow.result.v1",
}


@cache
def asyncapi() -> dict[str, Any]:
    document = yaml.safe_load(ASYNCAPI.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def walk(node: Any, path: str = "#") -> Iterator[tuple[str, Any]]:
    """Every (JSON pointer, value) pair of a parsed document."""
    yield path, node
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{path}/{index}")


def refs() -> list[tuple[str, str]]:
    return [
        (where, node["$ref"])
        for where, node in walk(asyncapi())
        if isinstance(node, dict) and isinstance(node.get("$ref"), str)
    ]


def resolve_pointer(document: Any, pointer: str) -> Any:
    node = document
    for raw in pointer.removeprefix("#/").split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def amqp_binding(channel: dict[str, Any]) -> dict[str, Any]:
    binding = channel["bindings"]["amqp"]
    assert isinstance(binding, dict)
    return binding


def header_names(document: dict[str, Any], schema: dict[str, Any]) -> set[str]:
    """Property names of a headers schema, following $ref and allOf."""
    if "$ref" in schema:
        return header_names(document, resolve_pointer(document, schema["$ref"]))
    names = set(schema.get("properties", {}))
    for part in schema.get("allOf", []):
        names |= header_names(document, part)
    return names


def channel_by_queue(name: str) -> dict[str, Any]:
    for channel in asyncapi()["channels"].values():
        if amqp_binding(channel).get("queue", {}).get("name") == name:
            assert isinstance(channel, dict)
            return channel
    raise AssertionError(f"no channel declares queue {name!r}")


# --- JSON Schemas --------------------------------------------------------------------


def test_json_schemas_match_the_models() -> None:
    """The JSON Schemas in schemas/ are exactly what the pydantic models generate."""
    stale = stale_schemas(SCHEMAS)

    assert stale == [], f"schemas out of date: {stale}; run `make schemas` and commit the result"


@pytest.mark.parametrize("file_name", sorted(SCHEMA_FILES))
def test_json_schema_has_schema_and_id(file_name: str) -> None:
    """Every JSON Schema declares its dialect ($schema, draft 2020-12) and its $id."""
    schema = json.loads((SCHEMAS / file_name).read_text(encoding="utf-8"))

    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].endswith(f"/{file_name}")


def test_every_json_schema_file_is_generated() -> None:
    """No stray *.schema.json in schemas/ that no model generates."""
    on_disk = {path.name for path in SCHEMAS.glob("*.schema.json")}

    assert on_disk == set(SCHEMA_FILES)


def test_schema_constants_are_pinned() -> None:
    """Each schema pins its message's 'schema' value (the version integrators check)."""
    event = json.loads((SCHEMAS / "internal.event.v2.schema.json").read_text(encoding="utf-8"))
    candidate = json.loads((SCHEMAS / "candidate.v1.schema.json").read_text(encoding="utf-8"))
    error = json.loads((SCHEMAS / "llmbot.error.v1.schema.json").read_text(encoding="utf-8"))

    assert "schema" in event["required"]
    assert event["properties"]["schema"]["pattern"].startswith("^internal\\.event\\.v2")
    assert candidate["properties"]["schema"]["const"] == "candidate.v1"
    assert error["properties"]["schema"]["const"] == "llmbot.error.v1"


# --- AsyncAPI ------------------------------------------------------------------------


def test_asyncapi_is_version_3() -> None:
    """schemas/asyncapi.yaml parses as YAML and is an AsyncAPI 3.0.0 document."""
    document = asyncapi()

    assert document["asyncapi"] == "3.0.0"
    assert document["info"]["title"]
    assert document["info"]["version"]
    assert document["defaultContentType"] == "application/json"


def test_asyncapi_server_is_local_amqp() -> None:
    """The server is AMQP on localhost:5672."""
    servers = asyncapi()["servers"]

    assert [(s["protocol"], s["host"]) for s in servers.values()] == [("amqp", "localhost:5672")]


def test_asyncapi_names_every_routing_key_queue_and_exchange() -> None:
    """The document names exactly the SPEC section 3 routing keys, queues and exchanges."""
    channels = [c for c in asyncapi()["channels"].values() if c["address"] is not None]
    bindings = [amqp_binding(channel) for channel in channels]

    routing_keys = {
        c["address"] for c, b in zip(channels, bindings, strict=True) if b["is"] == "routingKey"
    }
    queues = {b["queue"]["name"] for b in bindings if b["is"] == "queue"}
    queue_addresses = {
        c["address"] for c, b in zip(channels, bindings, strict=True) if b["is"] == "queue"
    }
    exchanges = {b["exchange"]["name"]: b["exchange"]["type"] for b in bindings if "exchange" in b}

    assert routing_keys == ROUTING_KEYS
    assert queues == QUEUES
    assert queue_addresses == QUEUES
    assert exchanges == EXCHANGES
    assert all(b["exchange"]["durable"] for b in bindings if "exchange" in b)
    assert all(b["queue"]["durable"] for b in bindings if "queue" in b)


def test_asyncapi_reply_to_is_the_dynamic_default_exchange_address() -> None:
    """Replies go to each event's own reply_to through the default exchange, transient."""
    document = asyncapi()
    channel = document["channels"]["replyTo"]
    operation = document["operations"]["sendReply"]

    assert channel["address"] is None
    assert amqp_binding(channel)["exchange"]["name"] == ""
    assert set(channel["messages"]) == {"delta", "candidate", "error"}
    assert operation["bindings"]["amqp"]["deliveryMode"] == 1
    assert operation["bindings"]["amqp"]["mandatory"] is False
    delta = document["components"]["messages"]["CandidateDeltaV1"]
    assert delta["payload"]["schema"] == {"$ref": "./candidate.delta.v1.schema.json"}


def test_asyncapi_channel_bindings_are_valid_amqp() -> None:
    """Each AMQP channel binding is either a routing key with an exchange or a queue."""
    for name, channel in asyncapi()["channels"].items():
        binding = amqp_binding(channel)
        if binding["is"] == "routingKey":
            assert "exchange" in binding, name
            assert "queue" not in binding, name
        else:
            assert binding["is"] == "queue", name
            assert "queue" in binding, name
            assert "exchange" not in binding, name


def test_asyncapi_names_agree_with_the_code_defaults() -> None:
    """The names in the document are the ones the service declares by default."""
    topology = Topology()
    channels = asyncapi()["channels"]

    assert channels["ingress"]["address"] == topology.ingress_routing_key
    assert amqp_binding(channels["ingress"])["exchange"]["name"] == topology.exchange
    assert channels["candidate"]["address"] == topology.candidate_routing_key
    assert channels["error"]["address"] == topology.error_routing_key
    assert amqp_binding(channels["deadLetter"])["exchange"]["name"] == topology.dlx
    assert channels["deadLetter"]["address"] == topology.ingress_routing_key
    assert channel_by_queue(topology.ingress_queue)["address"] == topology.ingress_queue
    assert channel_by_queue(topology.dlq)["address"] == topology.dlq


def test_asyncapi_ingress_queue_is_quorum_and_dead_letters() -> None:
    """The ingress queue is documented as quorum, dead-lettering to internal.dlx, as declared."""
    binding = amqp_binding(channel_by_queue("llm-bot.internal.llmbot.v1"))

    assert binding["x-queue-arguments"] == dict(Topology().ingress_arguments())
    assert binding["x-queue-arguments"]["x-dead-letter-exchange"] == "internal.dlx"
    assert binding["x-bindings"] == [{"exchange": "internal", "routingKey": "internal.llmbot.v1"}]


@pytest.mark.parametrize(
    ("operation", "action", "channel"),
    [
        ("receiveEvent", "receive", "ingressQueue"),
        ("sendCandidate", "send", "candidate"),
        ("sendError", "send", "error"),
        ("sendDeadLetter", "send", "deadLetter"),
    ],
)
def test_asyncapi_operations(operation: str, action: str, channel: str) -> None:
    """llm-bot receives the ingress and sends candidates, errors and dead letters."""
    op = asyncapi()["operations"][operation]

    assert op["action"] == action
    assert op["channel"] == {"$ref": f"#/channels/{channel}"}
    assert op["messages"]
    for message in op["messages"]:
        assert message["$ref"].startswith(f"#/channels/{channel}/messages/")
    if action == "send":
        assert op["bindings"]["amqp"]["deliveryMode"] == 2


@pytest.mark.parametrize(
    ("message", "schema_file"),
    [
        ("InternalEventV2", "internal.event.v2.schema.json"),
        ("CandidateV1", "candidate.v1.schema.json"),
        ("ErrorV1", "llmbot.error.v1.schema.json"),
        ("DeadLetter", "internal.event.v2.schema.json"),
    ],
)
def test_asyncapi_messages_reference_the_json_schemas(message: str, schema_file: str) -> None:
    """Each message's payload is the JSON Schema file of its model, as draft 2020-12 JSON."""
    document = asyncapi()
    msg = document["components"]["messages"][message]

    assert msg["contentType"] == "application/json"
    assert msg["payload"]["schemaFormat"] == "application/schema+json;version=draft-2020-12"
    assert msg["payload"]["schema"] == {"$ref": f"./{schema_file}"}
    assert msg["bindings"]["amqp"]["contentEncoding"] == "utf-8"
    traits = [resolve_pointer(document, trait["$ref"]) for trait in msg.get("traits", [])]
    headers = next(part["headers"] for part in [msg, *traits] if "headers" in part)
    assert {"traceparent", "tracestate"} <= header_names(document, headers)
    assert any("correlationId" in part for part in [msg, *traits])


def test_asyncapi_documents_the_amqp_properties() -> None:
    """The shared message trait documents message_id, correlation_id and delivery mode 2."""
    trait = asyncapi()["components"]["messageTraits"]["amqpJson"]
    properties = trait["x-amqp-properties"]

    assert properties["delivery_mode"] == 2
    assert properties["content_type"] == "application/json"
    assert "`id`" in properties["message_id"]
    assert "conversation_id" in properties["correlation_id"]
    assert trait["correlationId"] == {"$ref": "#/components/correlationIds/conversation"}
    location = asyncapi()["components"]["correlationIds"]["conversation"]["location"]
    assert location == "$message.payload#/conversation_id"


def test_asyncapi_dead_letter_headers() -> None:
    """Dead letters document the x-error-code, x-error-message and x-attempts headers."""
    document = asyncapi()
    ref = document["components"]["messages"]["DeadLetter"]["headers"]["$ref"]
    headers = resolve_pointer(document, ref)

    assert {"x-error-code", "x-error-message", "x-attempts"} <= header_names(document, headers)
    assert set(headers["required"]) == {"x-error-code", "x-error-message", "x-attempts"}
    assert set(headers["properties"]["x-error-code"]["enum"]) == {
        "invalid_event",
        "model_error",
        "memory_unavailable",
        "timeout",
        "internal",
    }


def test_asyncapi_memory_jobs_reference_their_schema() -> None:
    """The memory-jobs message is MemoryJobV1, described by its generated JSON Schema."""
    payload = asyncapi()["components"]["messages"]["MemoryJob"]["payload"]

    assert payload["schema"]["$ref"] == "./llmbot.memory_job.v1.schema.json"


def test_asyncapi_file_refs_point_at_existing_schemas() -> None:
    """Every $ref to a local file points at an existing file in schemas/."""
    file_refs = [(where, ref) for where, ref in refs() if not ref.startswith("#")]

    assert file_refs, "expected the messages to reference the JSON Schema files"
    for where, ref in file_refs:
        target = (SCHEMAS / ref.split("#", 1)[0]).resolve()
        assert target.parent == SCHEMAS.resolve(), f"{where}: {ref} leaves schemas/"
        assert target.is_file(), f"{where}: {ref} does not exist"


def test_asyncapi_internal_refs_resolve() -> None:
    """Every in-document $ref ('#/...') resolves to a node of the document."""
    document = asyncapi()
    for where, ref in refs():
        if ref.startswith("#"):
            try:
                resolve_pointer(document, ref)
            except (KeyError, IndexError, ValueError, TypeError):
                pytest.fail(f"{where}: {ref} does not resolve")
