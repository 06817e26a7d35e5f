"""Check docker-compose.yml and the collector config without Docker: they parse, and they agree.

    .venv/bin/python deploy/check.py

- docker-compose.yml: every depends_on names a service, every named volume is declared, every bind
  mount exists, the collector gets every ${env:...} its config reads, only the proxy publishes the web
  app, and the secret key has no default.
- deploy/otel-collector.yaml: every component a pipeline names is defined, every extension used is
  defined, and each component's keys are among those its documentation lists (below, for the
  components used here; the collector itself rejects unknown keys at start, so a typo would stop it).
"""

import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
COLLECTOR = ROOT / "deploy" / "otel-collector.yaml"

# Keys from the collector's component documentation (core and contrib READMEs).
DOCUMENTED = {
    "receivers.otlp": {"protocols"},
    "receivers.otlp.protocols.grpc": {"endpoint", "max_recv_msg_size_mib", "tls", "keepalive", "auth"},
    "receivers.otlp.protocols.http": {"endpoint", "cors", "tls", "auth", "traces_url_path", "logs_url_path"},
    "processors.memory_limiter": {
        "check_interval",
        "limit_mib",
        "spike_limit_mib",
        "limit_percentage",
        "spike_limit_percentage",
    },
    "processors.batch": {"send_batch_size", "send_batch_max_size", "timeout", "metadata_keys"},
    "exporters.otlphttp": {
        "endpoint",
        "traces_endpoint",
        "logs_endpoint",
        "metrics_endpoint",
        "encoding",
        "compression",
        "timeout",
        "headers",
        "tls",
        "retry_on_failure",
        "sending_queue",
        "read_buffer_size",
        "write_buffer_size",
    },
    "exporters.otlphttp.retry_on_failure": {
        "enabled",
        "initial_interval",
        "max_interval",
        "max_elapsed_time",
        "multiplier",
        "randomization_factor",
    },
    "exporters.otlphttp.sending_queue": {
        "enabled",
        "num_consumers",
        "queue_size",
        "storage",
        "block_on_overflow",
        "sizer",
        "batch",
    },
    "extensions.health_check": {"endpoint", "path"},
    "extensions.file_storage": {"directory", "create_directory", "timeout", "compaction", "fsync"},
}


def kind(name: str) -> str:
    """``otlphttp/ctxview`` -> ``otlphttp``: a component's type before its optional name."""
    return name.split("/", 1)[0]


def check_keys(section: str, name: str, config: dict | None, problems: list[str]) -> None:
    documented_key = f"{section}.{kind(name)}"
    allowed = DOCUMENTED.get(documented_key)
    if allowed is None:
        problems.append(f"{section}.{name}: no documented keys recorded in deploy/check.py")
        return
    for key, value in (config or {}).items():
        if key not in allowed:
            problems.append(f"{section}.{name}.{key}: not a documented key of {kind(name)}")
        nested = DOCUMENTED.get(f"{documented_key}.{key}")
        if nested is not None and isinstance(value, dict):
            problems += [
                f"{section}.{name}.{key}.{sub}: not documented" for sub in value if sub not in nested
            ]


def check_collector(config: dict) -> list[str]:
    problems: list[str] = []
    for section in ("receivers", "processors", "exporters", "extensions"):
        for name, component in (config.get(section) or {}).items():
            check_keys(section, name, component, problems)
    for protocol, settings in config["receivers"]["otlp"]["protocols"].items():
        nested = DOCUMENTED.get(f"receivers.otlp.protocols.{protocol}", set())
        problems += [f"otlp {protocol}.{key}: not documented" for key in settings or {} if key not in nested]
    service = config["service"]
    problems += [f"extension {name} is not defined" for name in service.get("extensions", [])
                 if name not in (config.get("extensions") or {})]  # fmt: skip
    for pipeline, parts in service["pipelines"].items():
        for section in ("receivers", "processors", "exporters"):
            for name in parts.get(section, []):
                if name not in (config.get(section) or {}):
                    problems.append(f"pipeline {pipeline}: {section[:-1]} {name} is not defined")
    return problems


def check_compose(compose: dict, collector_text: str) -> list[str]:
    problems: list[str] = []
    services = compose["services"]
    volumes = set(compose.get("volumes") or {})
    for name, service in services.items():
        for dependency in service.get("depends_on") or {}:
            if dependency not in services:
                problems.append(f"{name} depends on {dependency}, which is not a service")
        for mount in service.get("volumes") or []:
            source = mount.split(":", 1)[0]
            if source.startswith((".", "/")):
                if not (ROOT / source).exists():
                    problems.append(f"{name} mounts {source}, which does not exist")
            elif source not in volumes:
                problems.append(f"{name} uses volume {source}, which is not declared")
    collector = services.get("collector", {})
    wanted = set(re.findall(r"\$\{env:([A-Z0-9_]+)\}", collector_text))
    given = set(collector.get("environment") or {})
    problems += [
        f"the collector reads ${{env:{name}}} but compose does not set it" for name in wanted - given
    ]
    # gunicorn is reached only through the buffering proxy (deploy/nginx): slow clients would hold it.
    if services.get("web", {}).get("ports"):
        problems.append("web publishes ports: only the proxy may (deploy/nginx)")
    secret = str((compose.get("x-ctxview-env") or {}).get("CTXVIEW_SECRET_KEY", ""))
    if ":-" in secret:
        problems.append("CTXVIEW_SECRET_KEY has a default: anyone could sign sessions with it")
    ports = {str(port).split(":")[-1] for port in collector.get("ports", [])}
    problems += [f"the collector does not publish {port}" for port in ("4317", "4318") if port not in ports]
    return problems


def main() -> None:
    collector_text = COLLECTOR.read_text()
    collector = yaml.safe_load(collector_text)
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    problems = check_collector(collector) + check_compose(compose, collector_text)
    for problem in problems:
        print(problem)
    if problems:
        sys.exit(1)
    services = ", ".join(compose["services"])
    pipelines = ", ".join(collector["service"]["pipelines"])
    print(f"ok: compose services {services}; collector pipelines {pipelines}")


if __name__ == "__main__":
    main()
