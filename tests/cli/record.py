"""Record what the coding-agent CLIs really export: run each one against a local fake of its provider.

    python -m tests.cli.record claude-code-default --out tests/data/cli
    python -m tests.cli.record --all --out tests/data/cli
    python -m tests.cli.record --list

For each scenario: install the CLI from the npm registry at its pinned version into
``.cache/cli/<name>@<version>`` (once; git-ignored), then, in a network namespace where only loopback
exists (``unshare -n``; needs root or user namespaces), start the fake provider API (``fakes.py``) and
the capturing OTLP/HTTP receiver (``capture.py``), write the CLI's config into a scratch HOME under
``.cache/cli/runs/<scenario>``, run the CLI non-interactively with a fake API key for two turns
(the second resumes the first), and save ``<out>/<scenario>.json``: the CLI and version, the
environment and config files used (run paths, ports and keys replaced by placeholders), the fake's
script, every request it received with the usage it reported, and every OTLP traces and logs body the
CLI sent, as OTLP/JSON. The process exits 1, and writes ``<scenario>.failed.json`` instead, when the
CLI failed, a scripted step went unused or an export did not decode.

With ``--via-proxy`` the CLI's base URL is a ``ctxview proxy`` (``python -m ctxview.proxy``) started in
the same namespace, forwarding to the fake and exporting to a second capturing receiver; the document
(``<scenario>.via-proxy.json``) then also holds the proxy's exports and every request body the fake
received (``tests/cli/test_through_proxy.py`` compares the two).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from tests.cli import fakes
from tests.cli.capture import METRICS, CaptureReceiver
from tests.cli.fakes import FakeAPI, Step, ToolCall, Usage

ROOT = Path(__file__).resolve().parents[2]
CACHE = ROOT / ".cache" / "cli"
FIXTURES = ROOT / "tests" / "data" / "cli"
INSIDE_FLAG = "--inside-namespace"
FAKE_KEY = "fake-key-not-a-secret"
CLI_TIMEOUT = 240  # seconds per CLI invocation; a healthy run takes a few seconds
QUIET = 1.5  # seconds without an export before the capture counts as complete
VIA_PROXY_FLAG = "--via-proxy"
PROXY_KEY = "cvk_fake-ingest-key-for-the-proxy"  # what the proxy sends its exports with (to the capture)
PROXY_ROUTES = {fakes.ANTHROPIC: "anthropic", fakes.OPENAI_RESPONSES: "openai", fakes.GEMINI: "gemini"}

# The conversation, the same for every CLI. The bracketed markers are how the fake recognises a turn.
NOTES_HEAD = "Deploy window: Tuesday 14:00 UTC.\nOwner: pay-team.\nRollback: ./rollback.sh\n"
# A change log long enough that Claude Code's later request bodies pass its 61,440-character cut for
# api_request_body, so the detailed recording shows whether and how it truncates.
NOTES = NOTES_HEAD + "".join(
    f"- change {n:03d}: rotated the pay-shard-{n % 8} credentials and re-ran the smoke tests.\n"
    for n in range(240)
)
PROMPT_1 = "[turn-1] Read notes.txt and tell me when the deploy window is."
PROMPT_2 = "[turn-2] Thanks. Who owns the deploy?"
SUBAGENT_PROMPT = "[subagent] Count the lines in notes.txt and report the number."
ANSWER_1 = "The deploy window is Tuesday 14:00 UTC."
ANSWER_2 = "pay-team owns the deploy."


@dataclass(frozen=True)
class Cli:
    name: str
    package: str
    version: str
    bin: str

    @property
    def folder(self) -> Path:
        return CACHE / f"{self.name}@{self.version}"

    @property
    def executable(self) -> Path:
        return self.folder / "node_modules" / ".bin" / self.bin


CLIS = {
    "claude-code": Cli("claude-code", "@anthropic-ai/claude-code", "2.1.332", "claude"),
    "codex": Cli("codex", "@openai/codex", "0.171.0", "codex"),
    "gemini-cli": Cli("gemini-cli", "@google/gemini-cli", "0.61.0", "gemini"),
}


@dataclass
class Run:
    """Everything one scenario run needs to know about where things are."""

    folder: Path
    home: Path
    work: Path
    fake_url: str
    otlp_url: str

    def placeholders(self, text: str) -> str:
        """Run-specific paths and addresses as placeholders, so fixtures say what, not where."""
        for value, name in (
            (str(self.work), "$WORK"),
            (str(self.home), "$HOME"),
            (self.fake_url, "$FAKE_API"),
            (self.otlp_url, "$OTLP"),
            (FAKE_KEY, "$FAKE_KEY"),
        ):
            text = text.replace(value, name)
        return text


@dataclass(frozen=True)
class Scenario:
    name: str
    cli: str
    api: str
    description: str
    steps: Callable[[Run], list[Step]]
    configure: Callable[[Run], tuple[dict[str, str], dict[str, str]]]  # -> (env, files under HOME)
    turns: Callable[[Run], list[list[str]]]  # argv after the executable, one list per turn
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Claude Code
# ---------------------------------------------------------------------------------------------
def claude_steps(run: Run) -> list[Step]:
    # The Agent call runs in the foreground (agents default to the background in 2.1), so the
    # subagent's two requests come between the main agent's second and third.
    notes = str(run.work / "notes.txt")
    return [
        Step("main-read", Usage(12, 48, cache_write=5210), prompt="[turn-1]",
             tool_call=ToolCall("Read", {"file_path": notes}, "toolu_fake_read_1")),
        Step("main-agent", Usage(9, 61, cache_read=5210, cache_write=310), after_call="toolu_fake_read_1",
             tool_call=ToolCall("Agent", {"description": "Count lines", "prompt": SUBAGENT_PROMPT,
                                          "run_in_background": False}, "toolu_fake_agent_1")),
        Step("sub-read", Usage(7, 33, cache_write=2950, cache_write_1h=950), prompt="[subagent]",
             tool_call=ToolCall("Read", {"file_path": notes}, "toolu_fake_read_2")),
        Step("sub-answer", Usage(5, 17, cache_read=2950, cache_write=120), after_call="toolu_fake_read_2",
             text=f"notes.txt has {NOTES.count(chr(10))} lines."),
        Step("main-answer", Usage(8, 29, cache_read=5520, cache_write=150), after_call="toolu_fake_agent_1",
             text=ANSWER_1),
        Step("turn-2", Usage(14, 11, cache_read=5670, cache_write=90), prompt="[turn-2]", text=ANSWER_2),
    ]  # fmt: skip


CLAUDE_BASE_ENV = {
    "CLAUDE_CODE_ENABLE_TELEMETRY": "1",
    "OTEL_LOGS_EXPORTER": "otlp",
    "OTEL_METRICS_EXPORTER": "none",
    "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
    "OTEL_LOGS_EXPORT_INTERVAL": "500",
    "DISABLE_AUTOUPDATER": "1",
}


def claude_configure(mode: str) -> Callable[[Run], tuple[dict[str, str], dict[str, str]]]:
    def configure(run: Run) -> tuple[dict[str, str], dict[str, str]]:
        env = CLAUDE_BASE_ENV | {
            "ANTHROPIC_BASE_URL": run.fake_url,
            "ANTHROPIC_API_KEY": FAKE_KEY,
            "OTEL_EXPORTER_OTLP_ENDPOINT": run.otlp_url,
        }
        if mode in ("traces", "detailed"):
            env |= {"OTEL_TRACES_EXPORTER": "otlp", "CLAUDE_CODE_ENHANCED_TELEMETRY_BETA": "1"}
        if mode == "detailed":
            env |= {
                "ENABLE_BETA_TRACING_DETAILED": "1",
                "BETA_TRACING_ENDPOINT": run.otlp_url,
                "OTEL_LOG_USER_PROMPTS": "1",
                "OTEL_LOG_TOOL_DETAILS": "1",
                "OTEL_LOG_RAW_API_BODIES": "1",
            }
        # Read and Agent need no permission prompt in -p mode; the settings file only skips onboarding.
        files = {".claude.json": json.dumps({"hasCompletedOnboarding": True}, indent=1)}
        return env, files

    return configure


def claude_turns(run: Run) -> list[list[str]]:
    return [
        ["-p", PROMPT_1, "--output-format", "json"],
        ["-p", "--continue", PROMPT_2, "--output-format", "json"],
    ]


# ---------------------------------------------------------------------------------------------
# Codex CLI
# ---------------------------------------------------------------------------------------------
CODEX_MODEL = "gpt-5.5-codex"


def codex_steps(run: Run) -> list[Step]:
    return [
        Step("read", Usage(1840, 96, cache_write=3072, reasoning=64), prompt="[turn-1]",
             tool_call=ToolCall("exec_command", {"cmd": "cat notes.txt"}, "call_fake_cat_1")),
        Step("answer", Usage(212, 41, cache_read=4864, cache_write=128, reasoning=16),
             after_call="call_fake_cat_1", text=ANSWER_1),
        Step("turn-2", Usage(57, 23, cache_read=5120, cache_write=96, reasoning=8), prompt="[turn-2]",
             text=ANSWER_2),
    ]  # fmt: skip


def codex_configure(run: Run) -> tuple[dict[str, str], dict[str, str]]:
    config = f"""\
model = "{CODEX_MODEL}"
model_provider = "fake"

[model_providers.fake]
name = "Fake"
base_url = "{run.fake_url}/v1"
env_key = "FAKE_OPENAI_API_KEY"
wire_api = "responses"

[otel]
environment = "test"
log_user_prompt = true
exporter = {{ otlp-http = {{ endpoint = "{run.otlp_url}/v1/logs", protocol = "binary" }} }}
trace_exporter = {{ otlp-http = {{ endpoint = "{run.otlp_url}/v1/traces", protocol = "binary" }} }}
"""
    env = {"CODEX_HOME": str(run.home / ".codex"), "FAKE_OPENAI_API_KEY": FAKE_KEY}
    return env, {".codex/config.toml": config}


def codex_json_configure(run: Run) -> tuple[dict[str, str], dict[str, str]]:
    env, files = codex_configure(run)
    return env, {
        name: text.replace('protocol = "binary"', 'protocol = "json"') for name, text in files.items()
    }


def codex_turns(run: Run) -> list[list[str]]:
    return [
        ["exec", "--skip-git-repo-check", PROMPT_1],
        ["exec", "--skip-git-repo-check", "resume", "--last", PROMPT_2],
    ]


# ---------------------------------------------------------------------------------------------
# Gemini CLI
# ---------------------------------------------------------------------------------------------
GEMINI_MODEL = "gemini-3.1-pro-preview"


def gemini_steps(run: Run) -> list[Step]:
    return [
        Step("read", Usage(4100, 52, reasoning=30), prompt="[turn-1]",
             tool_call=ToolCall("read_file", {"file_path": "notes.txt"}, "call_fake_read_1")),
        Step("answer", Usage(310, 27, cache_read=4096, reasoning=12), after_call="call_fake_read_1",
             text=ANSWER_1),
        Step("turn-2", Usage(95, 19, cache_read=4352, reasoning=7), prompt="[turn-2]", text=ANSWER_2),
    ]  # fmt: skip


def gemini_configure(traces: bool) -> Callable[[Run], tuple[dict[str, str], dict[str, str]]]:
    def configure(run: Run) -> tuple[dict[str, str], dict[str, str]]:
        return _gemini_configure(run, traces)

    return configure


def _gemini_configure(run: Run, traces: bool) -> tuple[dict[str, str], dict[str, str]]:
    telemetry = {
        "enabled": True,
        "target": "local",
        "otlpEndpoint": run.otlp_url,
        "otlpProtocol": "http",
        "logPrompts": True,
    }
    if traces:
        # Without it llm_call spans carry no usage and no messages (runInDevTraceSpan's tracesEnabled).
        telemetry["traces"] = True
    settings = {"telemetry": telemetry, "security": {"auth": {"selectedType": "gemini-api-key"}}}
    env = {
        "GEMINI_API_KEY": FAKE_KEY,
        "GOOGLE_GEMINI_BASE_URL": run.fake_url,
        "GEMINI_CLI_TRUST_WORKSPACE": "true",
    }
    return env, {".gemini/settings.json": json.dumps(settings, indent=1)}


def gemini_turns(run: Run) -> list[list[str]]:
    # An explicit model: without it the CLI first asks a classifier model to route the prompt.
    return [
        ["-m", GEMINI_MODEL, "-p", PROMPT_1, "-o", "json"],
        ["-m", GEMINI_MODEL, "--resume", "latest", "-p", PROMPT_2, "-o", "json"],
    ]


SCENARIOS = {
    scenario.name: scenario
    for scenario in (
        Scenario("claude-code-default", "claude-code", fakes.ANTHROPIC,
                 "CLAUDE_CODE_ENABLE_TELEMETRY=1, OTEL_LOGS_EXPORTER=otlp (OTLP/HTTP protobuf)",
                 claude_steps, claude_configure("default"), claude_turns),
        Scenario("claude-code-traces", "claude-code", fakes.ANTHROPIC,
                 "as default, plus OTEL_TRACES_EXPORTER=otlp and CLAUDE_CODE_ENHANCED_TELEMETRY_BETA=1",
                 claude_steps, claude_configure("traces"), claude_turns),
        Scenario("claude-code-detailed", "claude-code", fakes.ANTHROPIC,
                 "as traces, plus ENABLE_BETA_TRACING_DETAILED=1, BETA_TRACING_ENDPOINT and "
                 "OTEL_LOG_USER_PROMPTS / OTEL_LOG_TOOL_DETAILS / OTEL_LOG_RAW_API_BODIES",
                 claude_steps, claude_configure("detailed"), claude_turns),
        Scenario("codex", "codex", fakes.OPENAI_RESPONSES,
                 "config.toml [otel] with otlp-http (binary) exporter and trace_exporter, a custom "
                 "model provider (wire_api=responses) pointing at the fake",
                 codex_steps, codex_configure, codex_turns),
        Scenario("codex-json", "codex", fakes.OPENAI_RESPONSES,
                 "as codex, with protocol = \"json\" (OTLP/JSON) for both exporters",
                 codex_steps, codex_json_configure, codex_turns),
        Scenario("gemini-cli", "gemini-cli", fakes.GEMINI,
                 "settings.json telemetry target local, otlpProtocol http (OTLP/JSON), logPrompts; "
                 "GOOGLE_GEMINI_BASE_URL pointing at the fake",
                 gemini_steps, gemini_configure(traces=False), gemini_turns),
        Scenario("gemini-cli-traces", "gemini-cli", fakes.GEMINI,
                 "as gemini-cli, plus telemetry.traces=true (GEMINI_TELEMETRY_TRACES_ENABLED)",
                 gemini_steps, gemini_configure(traces=True), gemini_turns),
    )
}  # fmt: skip


# ---------------------------------------------------------------------------------------------
# Install (outside the namespace: it needs the registry)
# ---------------------------------------------------------------------------------------------
class RecordError(Exception):
    pass


def installed_version(cli: Cli) -> str | None:
    if not cli.executable.exists():
        return None
    try:
        done = subprocess.run(
            [str(cli.executable), "--version"],
            capture_output=True,
            text=True,
            timeout=60,
            env=_base_env(CACHE / "version-home"),
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 and cli.version in done.stdout else None


def install(cli: Cli) -> str:
    """Install the pinned CLI into its own folder (never globally, never in HOME); its --version line."""
    version = installed_version(cli)
    if version:
        return version
    if shutil.which("npm") is None:
        raise RecordError("npm is not installed: the recorder installs the CLIs from the npm registry")
    cli.folder.mkdir(parents=True, exist_ok=True)
    (cli.folder / "package.json").write_text('{"private": true}\n')
    done = subprocess.run(
        [
            "npm",
            "install",
            "--no-audit",
            "--no-fund",
            "--prefix",
            str(cli.folder),
            f"{cli.package}@{cli.version}",
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env=os.environ | {"npm_config_cache": str(CACHE / "npm-cache")},
    )
    if done.returncode != 0:
        raise RecordError(f"npm install {cli.package}@{cli.version} failed: {done.stderr[-2000:]}")
    version = installed_version(cli)
    if not version:
        raise RecordError(f"{cli.executable} does not report version {cli.version} after install")
    return version


def _base_env(home: Path) -> dict[str, str]:
    home.mkdir(parents=True, exist_ok=True)
    node_bin = str(Path(shutil.which("node") or "/usr/bin/node").parent)
    return {
        "PATH": f"{node_bin}:/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),
        "LANG": "C.UTF-8",
        "TERM": "dumb",
        "NO_COLOR": "1",
        "TZ": "UTC",
    }


# ---------------------------------------------------------------------------------------------
# Record (inside the namespace)
# ---------------------------------------------------------------------------------------------
class ProxyProcess:
    """``python -m ctxview.proxy`` in front of the fake, exporting to ``send_to``; stopped with SIGTERM,
    which lets it send what it recorded before it exits."""

    def __init__(self, upstream: str, send_to: str, folder: Path) -> None:
        with socket.socket() as probe:  # a free port: alone in the namespace, nobody takes it meanwhile
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self.log = folder / "proxy.log"
        self.command = [
            sys.executable, "-m", "ctxview.proxy", "--listen", f"127.0.0.1:{self.port}",
            "--send-to", send_to, "--spool", str(folder / "spool"),
            *(arg for name in PROXY_ROUTES.values() for arg in ("--upstream", f"{name}={upstream}")),
        ]  # fmt: skip
        self.process: subprocess.Popen | None = None
        self.exit_code: int | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ProxyProcess:
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=os.environ | {"CTXVIEW_INGEST_KEY": PROXY_KEY},  # not on the command line
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and self.process.poll() is None:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), 0.5):
                return self
            time.sleep(0.1)
        self.stop()
        raise RecordError(f"the proxy did not start (exit {self.exit_code}): {self.log_tail()}")

    def stop(self) -> None:
        if self.process is None or self.exit_code is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.exit_code = self.process.wait(timeout=40)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.exit_code = self.process.wait()

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""


def check_loopback_only() -> str:
    """Fail unless the outside world is unreachable; the description goes into the fixture."""
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    probe.settimeout(2)
    try:
        result = probe.connect_ex(("192.0.2.1", 443))  # TEST-NET-1: never routed anywhere real
    finally:
        probe.close()
    if result not in (errno.ENETUNREACH, errno.EHOSTUNREACH):
        raise RecordError(f"a non-loopback address is reachable (connect gave {result}): refusing to run")
    return "network namespace with loopback only (unshare -n); 192.0.2.1:443 -> ENETUNREACH"


def record(scenario: Scenario, out: Path, via_proxy: bool = False) -> Path:
    """Run one scenario (already inside the namespace) and write its fixture; the fixture's path.
    ``via_proxy``: the CLI calls the fake through a ``ctxview proxy`` (see the module's docstring)."""
    cli = CLIS[scenario.cli]
    version = installed_version(cli)
    if not version:
        raise RecordError(f"{cli.package}@{cli.version} is not installed in {cli.folder}")
    network = check_loopback_only()
    name = f"{scenario.name}.via-proxy" if via_proxy else scenario.name
    folder = CACHE / "runs" / name
    shutil.rmtree(folder, ignore_errors=True)
    home, work = folder / "home", folder / "work"
    work.mkdir(parents=True)
    (work / "notes.txt").write_text(NOTES)
    # Its own empty repository: Claude Code puts `git status` and recent commits in its prompt, and
    # would otherwise find the ctxview checkout above the run folder (it ignores GIT_CEILING_DIRECTORIES).
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    problems: list[str] = []
    with contextlib.ExitStack() as stack:
        receiver = stack.enter_context(CaptureReceiver())
        fake = stack.enter_context(FakeAPI(scenario.api, []))
        proxy = proxy_receiver = None
        api_url = fake.url
        if via_proxy:
            proxy_receiver = stack.enter_context(CaptureReceiver())
            proxy = ProxyProcess(fake.url, proxy_receiver.url, folder).start()
            stack.callback(proxy.stop)
            api_url = f"{proxy.url}/{PROXY_ROUTES[scenario.api]}"
        run = Run(folder, home, work, api_url, receiver.url)
        fake.load(scenario.steps(run))
        cli_env, files = scenario.configure(run)
        for relative, text in files.items():
            (home / relative).parent.mkdir(parents=True, exist_ok=True)
            (home / relative).write_text(text)
        env = _base_env(home) | cli_env
        turns = []
        for argv in scenario.turns(run):
            started = time.monotonic()
            try:
                done = subprocess.run(
                    [str(cli.executable), *argv],
                    cwd=work,
                    env=env,
                    capture_output=True,
                    text=True,
                    timeout=CLI_TIMEOUT,
                    stdin=subprocess.DEVNULL,
                )
                code, stdout, stderr = done.returncode, done.stdout, done.stderr
            except subprocess.TimeoutExpired as exc:
                code, stdout, stderr = None, _text(exc.stdout), _text(exc.stderr)
                problems.append(f"{cli.bin} {' '.join(argv)} timed out after {CLI_TIMEOUT}s")
            if code not in (0, None):
                problems.append(f"{cli.bin} exited {code}: {stderr.strip()[-500:]}")
            turns.append(
                {
                    "argv": [cli.bin, *(run.placeholders(a) for a in argv)],
                    "exit_code": code,
                    "seconds": round(time.monotonic() - started, 1),
                    "stdout_tail": run.placeholders(stdout[-1500:]),
                    "stderr_tail": run.placeholders(stderr[-1500:]),
                }
            )
        receiver.wait_quiet(QUIET)
        keep_raw(receiver, folder / "otlp")
        problems += [f"step {name} was never asked for" for name in fake.unused_steps]
        problems += [f"export {error}" for error in receiver.errors]
        exports = [c.describe() for c in receiver.captures if c.signal != METRICS]
        if not exports:
            problems.append("the CLI exported nothing")
        document = {
            "scenario": scenario.name,
            "description": scenario.description,
            "cli": {
                "name": cli.name,
                "package": cli.package,
                "version": cli.version,
                "version_output": version,
            },
            "network": network,
            "env": {name: run.placeholders(value) for name, value in sorted(env.items())},
            "config_files": {f"$HOME/{name}": run.placeholders(text) for name, text in files.items()},
            "turns": turns,
            "conversation": {
                "notes.txt": NOTES,
                "prompts": [PROMPT_1, PROMPT_2],
                "subagent": SUBAGENT_PROMPT,
            },
            "provider": {
                "api": scenario.api,
                "script": fake.script(),
                "requests": [asdict(entry) for entry in fake.received],
            },
            "metrics_exports_not_kept": sum(1 for c in receiver.captures if c.signal == METRICS),
            "exports": exports,
            "problems": problems,
        }
        if proxy is not None and proxy_receiver is not None:
            proxy.stop()  # it sends what it recorded, then exits
            proxy_receiver.wait_quiet(QUIET)
            keep_raw(proxy_receiver, folder / "proxy-otlp")
            if proxy.exit_code != 0:
                problems.append(f"the proxy exited {proxy.exit_code}: {proxy.log_tail()[-500:]}")
            problems += [f"proxy export {error}" for error in proxy_receiver.errors]
            if not proxy_receiver.captures:
                problems.append("the proxy exported nothing")
            document["proxy"] = {
                "command": [run.placeholders(arg) for arg in proxy.command],
                "exit_code": proxy.exit_code,
                "log_tail": proxy.log_tail(),
                "exports": [c.describe() for c in proxy_receiver.captures],
            }
            # As the fake received them (run paths included: they are compared with the proxy's spans).
            document["provider"]["key_reached_the_fake"] = FAKE_KEY in fake.keys
            document["provider"]["bodies"] = [
                fake.bodies[entry.index].decode("utf-8", "replace") for entry in fake.received
            ]
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{name}{'.failed' if problems else ''}.json"
    # Compact: the Codex recording alone holds over a thousand spans.
    path.write_text(json.dumps(document, separators=(",", ":"), ensure_ascii=False) + "\n")
    if problems:
        raise RecordError(f"{scenario.name}: " + "; ".join(problems) + f" (see {path})")
    stale = out / f"{name}.failed.json"
    stale.unlink(missing_ok=True)
    return path


def keep_raw(receiver: CaptureReceiver, folder: Path) -> None:
    """Every export body exactly as it arrived (metrics too), next to the run, for exporter quirks
    that decoding smooths over (the fixture keeps the decoded OTLP/JSON)."""
    folder.mkdir(parents=True, exist_ok=True)
    for capture in receiver.captures:
        suffix = "json" if "json" in capture.content_type else "pb"
        if capture.content_encoding:
            suffix += f".{capture.content_encoding}"
        (folder / f"{capture.index:03d}-{capture.signal or 'unknown'}.{suffix}").write_bytes(capture.raw)


def _text(value: bytes | str | None) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""


def unshare_command() -> list[str]:
    """A new network namespace; without root, inside a new user namespace mapped to root (-r)."""
    return ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-r", "-n"]


def run_isolated(name: str, out: Path, via_proxy: bool = False) -> None:
    """Run ``record`` for one scenario in a fresh network namespace where only loopback is up."""
    if shutil.which("unshare") is None:
        raise RecordError("unshare (util-linux) is needed to cut the CLI off the network")
    inside = [sys.executable, "-m", "tests.cli.record", INSIDE_FLAG, name, "--out", str(out)]
    if via_proxy:
        inside.append(VIA_PROXY_FLAG)
    command = [*unshare_command(), "--", *inside]
    done = subprocess.run(command, cwd=ROOT, env=os.environ | {"PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        raise RecordError(f"recording {name} failed (exit {done.returncode}); see the output above")


def bring_loopback_up() -> None:
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.cli.record", description=__doc__.split("\n")[0])
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO", help=", ".join(SCENARIOS))
    parser.add_argument("--all", action="store_true", help="record every scenario")
    parser.add_argument("--list", action="store_true", help="list the scenarios")
    parser.add_argument("--out", type=Path, default=FIXTURES, help="where the fixtures go")
    parser.add_argument(
        VIA_PROXY_FLAG,
        action="store_true",
        help="the CLI calls the fake through a ctxview proxy; writes <scenario>.via-proxy.json",
    )
    parser.add_argument(INSIDE_FLAG, dest="inside", metavar="SCENARIO", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.list:
        for scenario in SCENARIOS.values():
            cli = CLIS[scenario.cli]
            print(f"{scenario.name:22} {cli.package}@{cli.version}: {scenario.description}")
        return 0
    out = args.out.resolve()
    try:
        if args.inside:
            bring_loopback_up()
            print(f"recorded {record(SCENARIOS[args.inside], out, args.via_proxy)}")
            return 0
        names = list(SCENARIOS) if args.all else args.scenarios
        if not names:
            parser.error("name a scenario, or --all")
        unknown = [name for name in names if name not in SCENARIOS]
        if unknown:
            parser.error(f"unknown scenario {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
        for cli_name in dict.fromkeys(SCENARIOS[name].cli for name in names):
            print(f"{CLIS[cli_name].package}: {install(CLIS[cli_name])}")
        failed = []
        for name in names:
            try:
                run_isolated(name, out, args.via_proxy)
            except RecordError as exc:
                failed.append(str(exc))
        for message in failed:
            print(message, file=sys.stderr)
        return 1 if failed else 0
    except RecordError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
