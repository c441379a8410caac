"""The deployment files in infra/ agree with the service: they parse, the RabbitMQ topology
and the Kubernetes settings match what the code declares and reads, the dashboard and the
alert rules use only exported metric names, and promtool accepts the rules and their tests."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry, generate_latest

from llm_bot.adapters.rabbit_topology import Topology
from llm_bot.config import Settings, load_settings
from llm_bot.telemetry.gateway_metrics import GatewayMetrics
from llm_bot.telemetry.metrics import Metrics
from llm_bot.telemetry.redis_metrics import RedisDurabilityMetrics

REPO_ROOT = Path(__file__).resolve().parents[2]
INFRA = REPO_ROOT / "infra"
K8S = INFRA / "k8s"
PROMETHEUS = INFRA / "prometheus"
DASHBOARD = INFRA / "grafana" / "dashboards" / "llm-bot.json"
DEFINITIONS = INFRA / "rabbitmq" / "definitions.json"

YAML_FILES = sorted(p for p in INFRA.rglob("*") if p.suffix in (".yaml", ".yml"))
JSON_FILES = sorted(INFRA.rglob("*.json"))

PROMTOOL_MISSING = (
    "promtool is not on PATH: install Debian's prometheus package "
    "(apt-get install -y prometheus), as .ci/run does"
)

# PromQL words that are not metric names: keywords, literals, and the functions and
# aggregations these files may call.
PROMQL_KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring"}
    | {"group_left", "group_right", "Inf", "NaN", "inf", "nan"}
)
PROMQL_FUNCTIONS = frozenset(
    {"sum", "min", "max", "avg", "count", "group", "stddev", "stdvar", "topk", "bottomk"}
    | {"quantile", "count_values", "abs", "absent", "absent_over_time", "ceil", "floor"}
    | {"changes", "clamp", "clamp_min", "clamp_max", "delta", "idelta", "deriv", "increase"}
    | {"rate", "irate", "resets", "histogram_quantile", "predict_linear", "round", "scalar"}
    | {"vector", "time", "timestamp", "sort", "sort_desc", "label_replace", "label_join"}
    | {"avg_over_time", "min_over_time", "max_over_time", "sum_over_time", "last_over_time"}
    | {"count_over_time", "quantile_over_time", "present_over_time", "sqrt", "exp", "ln"}
)
METRIC_PREFIXES = ("llmbot_", "rabbitmq_", "redis_")
SCRAPE_METRICS = {"up"}
"""Prometheus's own per target: whether the scrape succeeded (a node down)."""


def _yaml_documents(path: Path) -> list[Any]:
    return [doc for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")) if doc is not None]


def _k8s(kind: str, name: str) -> dict[str, Any]:
    for path in sorted(K8S.glob("*.yaml")):
        for doc in _yaml_documents(path):
            if doc.get("kind") == kind and doc.get("metadata", {}).get("name") == name:
                return dict(doc)
    raise AssertionError(f"no {kind} {name} in {K8S}")


@cache
def _definitions() -> dict[str, Any]:
    return dict(json.loads(DEFINITIONS.read_text(encoding="utf-8")))


def _queue(name: str) -> dict[str, Any]:
    queues = {q["name"]: q for q in _definitions()["queues"]}
    assert name in queues, f"queue {name} missing from {DEFINITIONS}"
    return dict(queues[name])


def _aliases() -> dict[str, str]:
    """Environment variable -> Settings field."""
    aliases: dict[str, str] = {}
    for field, info in Settings.model_fields.items():
        alias = info.validation_alias
        choices = getattr(alias, "choices", None)
        assert choices, f"Settings.{field} has no environment alias"
        aliases[str(choices[0]).upper()] = field
    return aliases


def _configmap() -> dict[str, str]:
    return dict(_k8s("ConfigMap", "llm-bot-config")["data"])


def _deployments() -> list[dict[str, Any]]:
    return [
        doc
        for path in sorted(K8S.glob("*.yaml"))
        for doc in _yaml_documents(path)
        if doc.get("kind") == "Deployment"
    ]


def _alert_rules() -> list[dict[str, Any]]:
    groups = yaml.safe_load((PROMETHEUS / "alerts.yml").read_text(encoding="utf-8"))["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _dashboard_exprs() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [
        target["expr"]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if "expr" in target
    ]


def _exprs(source: str) -> list[str]:
    if source == "alerts":
        return [str(rule["expr"]) for rule in _alert_rules()]
    return _dashboard_exprs()


def _promql_words(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, called functions) of a PromQL expression."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range and subquery selectors
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names: set[str] = set()
    functions: set[str] = set()
    for match in re.finditer(r"(?<![\w.$])([A-Za-z_:][\w:]*)(\s*\()?", text):
        word, call = match.group(1), match.group(2)
        if word in PROMQL_KEYWORDS:
            continue
        (functions if call else names).add(word)
    return names, functions


def _exported_llmbot_series() -> set[str]:
    """Every series name the service's own metrics produce (with their type suffixes): the
    consumer's and worker's, and the gateway's."""
    registry = CollectorRegistry()
    Metrics(registry=registry)
    GatewayMetrics(registry=registry)
    RedisDurabilityMetrics(registry=registry)
    suffixes = {
        "counter": ("_total",),
        "gauge": ("",),
        "histogram": ("_bucket", "_sum", "_count"),
    }
    return {
        family.name + suffix
        for family in registry.collect()
        for suffix in suffixes.get(family.type, ("",))
    }


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail(PROMTOOL_MISSING)
    return subprocess.run(  # noqa: S603  # promtool from PATH with this suite's own arguments
        [promtool, *args], capture_output=True, text=True, check=False, timeout=60
    )


@pytest.mark.parametrize("path", YAML_FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_every_yaml_file_parses(path: Path) -> None:
    """Each YAML file under infra/ parses, every document of a multi-document file too."""
    assert _yaml_documents(path), f"{path} has no document"


@pytest.mark.parametrize("path", JSON_FILES, ids=lambda p: str(p.relative_to(INFRA)))
def test_every_json_file_parses(path: Path) -> None:
    """Each JSON file under infra/ parses to an object."""
    assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict)


def test_infra_has_the_files_the_readme_promises() -> None:
    """The YAML and JSON globs above really find the stack, so the parse tests test it."""
    names = {p.relative_to(INFRA).as_posix() for p in [*YAML_FILES, *JSON_FILES]}
    assert {
        "compose.yaml",
        "prometheus/alerts.yml",
        "prometheus/tests.yml",
        "prometheus/prometheus.yml",
        "rabbitmq/definitions.json",
        "grafana/dashboards/llm-bot.json",
        "k8s/deployment.yaml",
        "k8s/keda-scaledobject.yaml",
    } <= names


def test_definitions_ingress_queue_arguments_equal_what_the_service_declares() -> None:
    """The ingress queue in definitions.json has exactly Topology().ingress_arguments()."""
    topology = Topology()
    queue = _queue(topology.ingress_queue)
    assert queue["arguments"] == dict(topology.ingress_arguments())
    assert queue["durable"] is True
    assert queue["auto_delete"] is False


def test_definitions_overflow_queues_equal_what_the_service_declares() -> None:
    """Every overflow queue, with exactly Topology().overflow_arguments()."""
    topology = Topology()
    for name in topology.overflow_queues():
        queue = _queue(name)
        assert queue["arguments"] == dict(topology.overflow_arguments())
        assert queue["durable"] is True


def test_definitions_memory_queue_arguments_equal_what_the_service_declares() -> None:
    """The memory queue has the memory worker's arguments: quorum, dead-lettering to the DLX."""
    memory = Topology().for_memory_worker()
    queue = _queue(memory.ingress_queue)
    assert queue["arguments"] == dict(memory.ingress_arguments())
    assert queue["durable"] is True


def test_definitions_dlqs_are_plain_durable_quorum_queues() -> None:
    """Both DLQs have exactly the arguments the service declares for them."""
    topology = Topology()
    for name in (topology.dlq, topology.memory_dlq):
        queue = _queue(name)
        assert queue["arguments"] == {"x-queue-type": "quorum"}
        assert queue["durable"] is True


def test_definitions_exchanges_and_bindings_match_the_topology() -> None:
    """Both exchanges are durable topics, bound to the queues with the service's keys."""
    topology = Topology()
    exchanges = {e["name"]: e for e in _definitions()["exchanges"]}
    for name in (topology.exchange, topology.dlx):
        assert exchanges[name]["type"] == "topic"
        assert exchanges[name]["durable"] is True
    bindings = {
        (b["source"], b["destination"], b["routing_key"])
        for b in _definitions()["bindings"]
        if b["destination_type"] == "queue"
    }
    assert bindings == {
        (topology.exchange, topology.ingress_queue, topology.ingress_routing_key),
        (topology.dlx, topology.dlq, topology.ingress_routing_key),
        (topology.exchange, topology.memory_queue, topology.memory_routing_key),
        (topology.dlx, topology.memory_dlq, topology.memory_routing_key),
    }


def test_definitions_policies_bound_every_queue_without_dropping_and_declare_nothing() -> None:
    """One policy bounds both DLQs (and expires dead letters after 14 days), another the
    ingress and memory queues; both refuse new messages when full (reject-publish: the
    publisher sees a nack) instead of dropping old ones; each queue gets exactly one."""
    topology = Topology()
    partitioned = replace(topology, ingress_partitions=4)
    policies = {policy["name"]: policy for policy in _definitions()["policies"]}
    assert set(policies) == {"llm-bot-dlq", "llm-bot-work"}
    work = (
        topology.ingress_queue,
        topology.memory_queue,
        *partitioned.partition_queues(),
        *topology.overflow_queues(),
    )
    bounded = {"llm-bot-dlq": (topology.dlq, topology.memory_dlq), "llm-bot-work": work}
    for name, policy in policies.items():
        for queue in (topology.dlq, topology.memory_dlq, *work):
            assert bool(re.fullmatch(policy["pattern"], queue)) == (queue in bounded[name])
        assert policy["definition"]["overflow"] == "reject-publish"
        assert policy["definition"]["max-length"] > 0
    assert policies["llm-bot-dlq"]["definition"]["message-ttl"] == 14 * 24 * 3600 * 1000
    assert policies["llm-bot-work"]["definition"]["max-length-bytes"] > 0


def test_configmap_keys_are_all_real_settings() -> None:
    """Every ConfigMap key is the environment variable of a Settings field."""
    unknown = set(_configmap()) - set(_aliases())
    assert not unknown, f"not settings of llm-bot: {sorted(unknown)}"


def test_configmap_has_every_llm_bot_setting_at_its_default() -> None:
    """Every LLM_BOT_* setting is in the ConfigMap at its default (unset ones as a comment)."""
    aliases = _aliases()
    data = _configmap()
    text = (K8S / "configmap.yaml").read_text(encoding="utf-8")
    llm_bot = {alias for alias in aliases if alias.startswith("LLM_BOT_")}
    unset = {a for a in llm_bot if Settings.model_fields[aliases[a]].default is None}
    for alias in sorted(unset):
        assert alias not in data, f"{alias} has no default: leave it commented out"
        assert re.search(rf"^\s*# {alias}: ", text, re.MULTILINE), f"{alias} is not documented"
    expected = llm_bot - unset
    assert expected - set(data) == set(), "missing from configmap.yaml"
    settings = load_settings(**{alias: data[alias] for alias in expected})
    for alias in sorted(expected):
        field = aliases[alias]
        assert getattr(settings, field) == Settings.model_fields[field].default, alias


def test_secrets_stay_out_of_the_configmap() -> None:
    """The API key and the broker URL (with its password) come from the Secret only."""
    assert {"OPENAI_API_KEY", "AMQP_URL"}.isdisjoint(_configmap())
    secret = _k8s("Secret", "llm-bot-secrets")
    assert set(secret["stringData"]) == {
        "OPENAI_API_KEY",
        "AMQP_URL",
        "LLM_BOT_GATEWAY_KEYS",
        "LLM_BOT_GATEWAY_TOKEN_SECRETS",
    }


@pytest.mark.parametrize("name", ["llm-bot", "llm-bot-worker"])
def test_deployment_probes_use_healthz_and_readyz_on_the_http_port(name: str) -> None:
    """Liveness asks /healthz, readiness /readyz, both on the port named http (9464)."""
    (container,) = _k8s("Deployment", name)["spec"]["template"]["spec"]["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http": Settings.model_fields["http_port"].default}
    assert int(_configmap()["LLM_BOT_HTTP_PORT"]) == ports["http"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    refs = [next(iter(ref.values()))["name"] for ref in container["envFrom"]]
    assert refs == ["llm-bot-config", "llm-bot-secrets"]


def test_gateway_serves_its_api_publicly_and_probes_and_metrics_internally() -> None:
    """The gateway's Service exposes only its API port (LLM_BOT_GATEWAY_PORT); its probes,
    Prometheus annotation and scrape job use the internal port (LLM_BOT_HTTP_PORT)."""
    deployment = _k8s("Deployment", "llm-bot-gateway")["spec"]["template"]
    (container,) = deployment["spec"]["containers"]
    port = int(_configmap()["LLM_BOT_GATEWAY_PORT"])
    internal = int(_configmap()["LLM_BOT_HTTP_PORT"])
    assert container["args"] == ["gateway"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"api": port, "http": internal}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert deployment["metadata"]["annotations"]["prometheus.io/port"] == str(internal)
    (service_port,) = _k8s("Service", "llm-bot-gateway")["spec"]["ports"]
    assert (service_port["port"], service_port["targetPort"]) == (port, "api")
    scrape = yaml.safe_load((PROMETHEUS / "prometheus.yml").read_text(encoding="utf-8"))
    [job] = [j for j in scrape["scrape_configs"] if j["job_name"] == "llm-bot-gateway"]
    assert job["static_configs"][0]["targets"] == [f"gateway:{internal}"]


def test_deployments_outlast_the_shutdown_grace_and_run_as_non_root() -> None:
    """terminationGracePeriodSeconds exceeds LLM_BOT_SHUTDOWN_GRACE_SECONDS; pods are locked down."""
    grace = float(_configmap()["LLM_BOT_SHUTDOWN_GRACE_SECONDS"])
    deployments = _deployments()
    assert {d["metadata"]["name"] for d in deployments} == {
        "llm-bot",
        "llm-bot-worker",
        "llm-bot-gateway",
    }
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        assert pod["terminationGracePeriodSeconds"] > grace
        assert pod["securityContext"]["runAsNonRoot"] is True
        for container in pod["containers"]:
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert {"requests", "limits"} <= set(container["resources"])


def test_keda_scales_the_deployment_on_the_ingress_queue_and_the_fair_backlog() -> None:
    """The KEDA rabbitmq trigger watches the ingress queue's length, host from the Secret;
    a Prometheus trigger watches the fair queue's backlog (a metric the service exports)."""
    scaled = _k8s("ScaledObject", "llm-bot")["spec"]
    assert scaled["scaleTargetRef"]["name"] == "llm-bot"
    assert (scaled["minReplicaCount"], scaled["maxReplicaCount"]) == (1, 20)
    trigger, backlog = scaled["triggers"]
    assert backlog["type"] == "prometheus"
    metrics = set(re.findall(r"llmbot_\w+", backlog["metadata"]["query"]))
    assert metrics == {"llmbot_events_in_flight", "llmbot_fair_queue_ready_conversations"}
    exported = generate_latest(Metrics(registry=CollectorRegistry()).registry).decode()
    for metric in metrics:
        assert f"# TYPE {metric} gauge" in exported
    assert trigger["type"] == "rabbitmq"
    assert trigger["metadata"]["queueName"] == Topology().ingress_queue
    assert trigger["metadata"]["mode"] == "QueueLength"
    auth = _k8s("TriggerAuthentication", trigger["authenticationRef"]["name"])["spec"]
    assert auth["secretTargetRef"] == [
        {"parameter": "host", "name": "llm-bot-secrets", "key": "AMQP_URL"}
    ]


def test_kustomization_lists_every_manifest_but_the_example_secret() -> None:
    """kubectl apply -k applies every manifest, never the placeholder Secret."""
    kustomization = yaml.safe_load((K8S / "kustomization.yaml").read_text(encoding="utf-8"))
    manifests = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == manifests - {"secret.example.yaml"}


def test_compose_wires_llm_bot_to_its_dependencies() -> None:
    """llm-bot talks to the compose services by name; the worker waits behind a profile."""
    services = yaml.safe_load((INFRA / "compose.yaml").read_text(encoding="utf-8"))["services"]
    bot = services["llm-bot"]
    assert bot["build"] == {"context": "..", "dockerfile": "infra/Dockerfile"}
    assert bot["environment"]["OPENAI_BASE_URL"] == "http://fake-model:8089/v1"
    assert services["fake-model"]["command"][:1] == ["fake-model"]
    assert {"rabbitmq", "redis", "fake-model"} <= set(bot["depends_on"])
    assert services["memory-worker"]["profiles"] == ["worker"]
    assert services["memory-worker"]["command"] == ["worker"]


def test_dashboard_uses_the_provisioned_datasource() -> None:
    """Every panel queries the datasource uid that Grafana provisioning creates."""
    provisioned = yaml.safe_load(
        (INFRA / "grafana" / "provisioning" / "datasources" / "prometheus.yaml").read_text(
            encoding="utf-8"
        )
    )
    (datasource,) = provisioned["datasources"]
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    for panel in dashboard["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["datasource"] == {"type": "prometheus", "uid": datasource["uid"]}
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == datasource["uid"]


def test_promql_word_extraction_tells_metrics_from_functions_and_labels() -> None:
    """The extractor below the metric-name tests finds metrics, not labels or functions."""
    names, functions = _promql_words(
        'histogram_quantile(0.95, sum by (le) (rate(a_bucket{queue="b.c"}[5m]))) > 1e3'
        " and on () max(rabbitmq_x) offset 5m"
    )
    assert names == {"a_bucket", "rabbitmq_x"}
    assert functions == {"histogram_quantile", "sum", "rate", "max"}


@pytest.mark.parametrize("source", ["alerts", "dashboard"])
def test_metric_names_are_llmbot_rabbitmq_or_redis(source: str) -> None:
    """Alert rules and dashboard use only llmbot_/rabbitmq_/redis_ metrics and known functions."""
    exprs = _exprs(source)
    assert exprs
    names: set[str] = set()
    for expr in exprs:
        found, functions = _promql_words(expr)
        assert functions <= PROMQL_FUNCTIONS, f"unknown functions {functions - PROMQL_FUNCTIONS}"
        names |= found
    assert names
    assert not [n for n in names - SCRAPE_METRICS if not n.startswith(METRIC_PREFIXES)], names


@pytest.mark.parametrize("source", ["alerts", "dashboard"])
def test_llmbot_metric_names_are_ones_the_service_exports(source: str) -> None:
    """Every llmbot_* series queried exists in the service's metrics (a rename breaks this)."""
    exprs = _exprs(source)
    used = {n for expr in exprs for n in _promql_words(expr)[0] if n.startswith("llmbot_")}
    assert used - _exported_llmbot_series() == set()


def test_dashboard_covers_red_for_the_service_and_use_for_the_queue() -> None:
    """The dashboard graphs the service's RED metrics and the queues' RabbitMQ metrics."""
    names = {n for expr in _dashboard_exprs() for n in _promql_words(expr)[0]}
    assert {
        "llmbot_events_total",
        "llmbot_event_duration_seconds_bucket",
        "llmbot_events_in_flight",
        "llmbot_model_request_duration_seconds_bucket",
        "llmbot_model_tokens_total",
        "llmbot_dead_letters_total",
        "llmbot_memory_trims_total",
        "llmbot_memory_window_messages_bucket",
        "llmbot_last_processed_timestamp_seconds",
        "rabbitmq_queue_messages_ready",
        "rabbitmq_queue_messages_unacked",
        "rabbitmq_queue_consumers",
        "rabbitmq_queue_messages",
        "rabbitmq_global_messages_redelivered_total",
    } <= names


def test_alert_rules_have_severity_summary_description_and_runbook() -> None:
    """Each alert of group llm-bot carries a severity and the annotations on-call reads."""
    rules = _alert_rules()
    assert {r["alert"] for r in rules} == {
        "LlmBotHighErrorRatio",
        "LlmBotHighLatencyP95",
        "LlmBotRecallSkipped",
        "LlmBotNoConsumers",
        "LlmBotDlqGrowing",
        "LlmBotStalled",
        "LlmBotHighDwellP99",
        "LlmBotTenantBudgetNearlySpent",
        "LlmBotTenantWaitingAtBound",
        "LlmBotFairQueueRepaired",
        "LlmBotQueueNearItsBound",
        "LlmBotRedisClusterDegraded",
        "LlmBotBrokerNodeDown",
        "LlmBotRedisNotDurable",
    }
    for rule in rules:
        assert rule["labels"]["severity"] in {"warning", "critical"}
        assert {"summary", "description", "runbook"} <= set(rule["annotations"])


@pytest.mark.infra
def test_promtool_check_rules_accepts_the_alert_rules() -> None:
    """promtool check rules passes on infra/prometheus/alerts.yml."""
    result = _promtool("check", "rules", str(PROMETHEUS / "alerts.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.infra
def test_promtool_test_rules_passes_the_alert_unit_tests() -> None:
    """promtool test rules passes infra/prometheus/tests.yml (alerts fire, and only then)."""
    result = _promtool("test", "rules", str(PROMETHEUS / "tests.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.infra
def test_promtool_check_config_accepts_the_prometheus_config() -> None:
    """promtool check config passes on prometheus.yml, its rule file included."""
    result = _promtool("check", "config", str(PROMETHEUS / "prometheus.yml"))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.infra
def test_dashboard_queries_are_valid_promql(tmp_path: Path) -> None:
    """Every dashboard query parses as PromQL (checked by promtool as recording rules)."""
    rules = [
        {"record": f"dashboard:query_{i}", "expr": expr.replace("$__rate_interval", "5m")}
        for i, expr in enumerate(_dashboard_exprs())
    ]
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    result = _promtool("check", "rules", str(path))
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_runs_redis_durable_and_without_eviction() -> None:
    """The shipped Redis keeps memory (AOF fsynced every second, on a volume) and never
    evicts; llm-bot refuses anything less there (docs/deployment.md "Redis for memory")."""
    compose = yaml.safe_load((INFRA / "compose.yaml").read_text(encoding="utf-8"))
    redis = compose["services"]["redis"]
    command = redis["command"]
    options = dict(zip(command[1::2], command[2::2], strict=True))
    assert command[0] == "redis-server"
    assert options["--appendonly"] == "yes"
    assert options["--appendfsync"] == "everysec"
    assert options["--maxmemory-policy"] == "noeviction"
    assert any(volume.endswith(":/data") for volume in redis["volumes"])
    assert "redis-data" in compose["volumes"]
    assert compose["services"]["llm-bot"]["environment"]["LLM_BOT_REDIS_DURABILITY"] == "require"
