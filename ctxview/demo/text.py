"""Deterministic filler text for the demo: prose, logs and code that tokenize like the real thing."""

import random

WORDS = (
    "the service request latency shard payment ledger retry queue worker timeout deploy config cache pool "
    "connection database index query upstream downstream client handler error budget alert threshold "
    "metric dashboard rollout canary replica primary failover lock transaction batch invoice customer "
    "order checkout gateway token session limit window backoff circuit breaker health probe"
).split()


def prose(rng: random.Random, sentences: int) -> str:
    out = []
    for _ in range(sentences):
        words = rng.choices(WORDS, k=rng.randint(8, 18))
        out.append(" ".join(words).capitalize() + ".")
    return " ".join(out)


def log_lines(rng: random.Random, lines: int, service: str, start_minute: int = 40) -> str:
    levels = ("INFO", "INFO", "INFO", "WARN", "ERROR")
    out = []
    for number in range(lines):
        second = number * 7 % 60
        minute = start_minute + number * 7 // 60
        level = rng.choice(levels)
        out.append(
            f"2026-11-24T09:{minute % 60:02d}:{second:02d}Z {level} {service} "
            f"request_id={rng.getrandbits(32):08x} route=/v1/{rng.choice(WORDS)} "
            f"latency_ms={rng.randint(20, 9000)} status={rng.choice((200, 200, 200, 504, 500))}"
        )
    return "\n".join(out)


def code(rng: random.Random, functions: int, module: str) -> str:
    out = [f"// {module}", "import { db } from '../db';", ""]
    for number in range(functions):
        name = f"{rng.choice(WORDS)}{rng.choice(WORDS).capitalize()}{number}"
        out += [
            f"export async function {name}(id: string, amount: number): Promise<number> {{",
            f"  const row = await db.query('SELECT {rng.choice(WORDS)} FROM {rng.choice(WORDS)}s"
            " WHERE id = $1', [id]);",
            f"  if (!row) throw new Error('{rng.choice(WORDS)} not found');",
            f"  return row.total + amount * {rng.randint(2, 99)};",
            "}",
            "",
        ]
    return "\n".join(out)


def tool_definition(rng: random.Random, name: str, parameters: dict, sentences: int = 4) -> dict:
    return {
        "name": name,
        "description": prose(rng, sentences),
        "input_schema": {"type": "object", "properties": parameters, "required": list(parameters)[:1]},
    }
