"""Hypothesis strategies for hostile OTLP input: what a misbehaving or malicious sender can put on the wire.

Requests are built as protobuf messages and then, at random, broken at the byte level (truncated, bits
flipped, a string made invalid UTF-8), compressed or written as OTLP/JSON, so the decoder sees both
well-formed junk and malformed bytes.
"""

import base64
import contextlib
import functools
import json
import zlib

from google.protobuf.message import DecodeError
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from ingest import families, semconv
from ingest.families import logfire, openinference, openllmetry, otel_events, otel_genai, pydantic_ai

INT64 = st.integers(-(2**63), 2**63 - 1)
UINT64 = st.integers(0, 2**64 - 1)

# Strings that have broken parsers before: NUL, digits that str.isdigit() accepts but int() does not,
# numbers too long for int(), JSON that nests past the recursion limit, JSON escapes that PostgreSQL
# cannot store (\u0000, lone surrogates), JSON constants that are not JSON (NaN).
NASTY_STRINGS = [
    "",
    " ",
    "\x00",
    "a\x00b",
    "²",
    "٣",
    "⁹⁹",
    "9" * 5000,
    "-1",
    "1e309",
    "NaN",
    "Infinity",
    "[" * 5000,
    '{"a":' * 5000,
    "[" * 3000 + "]" * 3000,
    '"\\u0000"',
    '"\\ud800"',
    '["\\udfff", "\\u0000"]',
    '{"\\u0000": 1}',
    "[NaN, Infinity, -Infinity]",
    '{"schema": "ctxview.manifest/1", "items": [{"id": "\\u0000", "kind": "k", "hash": "h"}]}',
    '[{"role": "user", "parts": [{"type": "text", "content": "\\u0000\\ud800"}]}]',
    '[{"role": "assistant", "parts": [{"type": "tool_call", "name": NaN, "id": "\\u0000"}]}]',
    '[{"role": {"x": 1}, "parts": "not a list", "content": [1, null, {}]}]',
    '[{"role": "tool", "tool_call_id": "\\u0000", "content": "\\ud83d"}]',
    "<script>alert(1)</script>",
    "sk-ant-" + "a" * 40,
    "\u202e\u2066",
]

KEYS = [
    semconv.OPERATION_NAME,
    openinference.SPAN_KIND,
    openllmetry.SPAN_KIND,
    openllmetry.REQUEST_TYPE,
    semconv.CTXVIEW_RUN_ID,
    semconv.CTXVIEW_TURN,
    semconv.CTXVIEW_MANIFEST,
    semconv.CONVERSATION_ID,
    semconv.SESSION_ID,
    otel_genai.INPUT_MESSAGES,
    otel_genai.OUTPUT_MESSAGES,
    otel_genai.SYSTEM_INSTRUCTIONS,
    otel_genai.TOOL_DEFINITIONS,
    otel_genai.LEGACY_PROMPT,
    otel_genai.LEGACY_COMPLETION,
    logfire.RAW_USAGE,
    pydantic_ai.REQUEST_PARAMETERS,
    semconv.SERVICE_NAME,
    semconv.EVENT_NAME_ATTRIBUTE,
    *semconv.REQUEST_MODEL,
    *semconv.PROVIDER,
    *semconv.RESPONSE_ID,
    *semconv.FINISH_REASONS,
    *semconv.AGENT_NAME,
    *families.INPUT_TOKENS,
    *families.OUTPUT_TOKENS,
    *families.CACHE_READ_TOKENS,
    *families.CACHE_WRITE_TOKENS,
    *families.REASONING_TOKENS,
    *semconv.TOOL_NAME,
    *semconv.TOOL_CALL_ID,
    *semconv.TOOL_CALL_ARGUMENTS,
    *semconv.TOOL_CALL_RESULT,
]
FLATTENED_PREFIXES = [
    openinference.INPUT_MESSAGES,
    openinference.OUTPUT_MESSAGES,
    openinference.TOOLS,
    otel_genai.LEGACY_PROMPT,
    otel_genai.LEGACY_COMPLETION,
    openllmetry.FUNCTIONS,
]
FLATTENED_TAILS = [
    "message.role",
    "message.content",
    "message.name",
    "message.tool_call_id",
    "message.contents.0.message_content.type",
    "message.contents.0.message_content.text",
    "message.tool_calls.0.tool_call.function.name",
    "message.tool_calls.0.tool_call.function.arguments",
    "tool.json_schema",
    "role",
    "content",
    "tool_calls.0.name",
    "tool_call_id",
    "name",
    "",
]
EVENT_NAMES = [
    otel_genai.EVENT_CONTENT_PROMPT,
    otel_genai.EVENT_CONTENT_COMPLETION,
    otel_genai.EVENT_OPERATION_DETAILS,
    otel_events.EVENT_CHOICE,
    *otel_events.EVENT_MESSAGE_ROLES,
    "exception",
]
OPERATIONS = ["chat", "generate_content", "text_completion", "execute_tool", "invoke_agent", "embeddings", ""]
ROLES = ["user", "assistant", "system", "developer", "tool", "", None, 7]
PART_TYPES = [
    "text",
    "tool_call",
    "tool_call_response",
    "tool_use",
    "tool_result",
    "reasoning",
    "image",
    None,
]


@functools.cache
def digits() -> st.SearchStrategy[str]:
    return st.one_of(st.integers(0, 20).map(str), st.sampled_from(["²", "٣", "00", "-1", "9" * 40, "x"]))


@functools.cache
def giant_strings() -> st.SearchStrategy[str]:
    # Big enough to cross the item content limit (256 KiB) without making every example slow.
    return st.builds(
        lambda char, size: char * size,
        st.sampled_from(["a", "é", "😀", "\x00", " "]),
        st.integers(1, 300_000),
    )


@functools.cache
def json_values(max_leaves: int = 20) -> st.SearchStrategy:
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=30),
        st.sampled_from(NASTY_STRINGS),
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=5),
            st.dictionaries(
                st.one_of(
                    st.sampled_from(["role", "parts", "type", "content", "id", "name"]), st.text(max_size=8)
                ),
                children,
                max_size=5,
            ),
        ),
        max_leaves=max_leaves,
    )


@st.composite
def _messages(draw) -> list:
    """Something shaped like gen_ai.input.messages, with wrong types mixed in."""
    result = []
    for _ in range(draw(st.integers(0, 6))):
        part = {
            "type": draw(st.sampled_from(PART_TYPES)),
            "content": draw(st.one_of(st.text(max_size=40), st.sampled_from(NASTY_STRINGS), json_values(5))),
        }
        if draw(st.booleans()):
            part |= {
                "name": draw(json_values(3)),
                "id": draw(json_values(3)),
                "arguments": draw(json_values(5)),
            }
        message = {
            "role": draw(st.sampled_from(ROLES)),
            "parts": draw(st.one_of(st.just([part]), json_values(5))),
        }
        if draw(st.booleans()):
            message["tool_calls"] = draw(json_values(6))
            message["tool_call_id"] = draw(json_values(2))
        result.append(draw(st.one_of(st.just(message), json_values(4))))
    return result


@st.composite
def _manifests(draw) -> dict:
    """Something shaped like a ctxview.manifest, with wrong types and out-of-range numbers mixed in."""
    numbers = st.one_of(
        st.integers(-5, 10**6), st.integers(2**31 - 2, 2**70), st.floats(), st.text(max_size=3), st.none()
    )
    items = []
    for index in range(draw(st.integers(0, 5))):
        item = {
            "id": draw(st.one_of(st.just(f"item:{index}"), st.sampled_from(NASTY_STRINGS), json_values(2))),
            "kind": draw(st.one_of(st.just("message"), st.text(max_size=3), st.none())),
            "hash": draw(st.one_of(st.just("0" * 32), st.text(max_size=200), st.none())),
            "bucket": draw(st.sampled_from(["system", "tools", "conversation", "bogus", None])),
            "tokens": draw(numbers),
            "origin_turn": draw(numbers),
            "content": draw(st.one_of(st.none(), st.text(max_size=50), st.sampled_from(NASTY_STRINGS))),
        }
        for flag in ("pinned", "content_truncated", "tokens_estimated", "cache_breakpoint"):
            if draw(st.booleans()):
                item[flag] = draw(st.one_of(st.booleans(), json_values(1)))
        items.append(draw(st.one_of(st.just(item), json_values(3))))
    manifest = {
        "schema": draw(st.sampled_from(["ctxview.manifest/1", "ctxview.manifest/1.1", "other", None])),
        "items": draw(st.one_of(st.just(items), json_values(3))),
    }
    if draw(st.booleans()):
        manifest["excluded"] = draw(
            st.one_of(
                st.lists(
                    st.fixed_dictionaries(
                        {"id": st.text(max_size=5), "reason": st.text(max_size=5), "tokens": numbers}
                    ),
                    max_size=3,
                ),
                json_values(3),
            )
        )
    if draw(st.booleans()):
        manifest["budget"] = draw(
            st.one_of(st.fixed_dictionaries({"limit": numbers, "input": numbers}), json_values(2))
        )
    if draw(st.booleans()):
        manifest["prompt_version"] = draw(json_values(1))
    return manifest


@functools.cache
def messages() -> st.SearchStrategy[list]:
    return _messages()


@functools.cache
def manifests() -> st.SearchStrategy[dict]:
    return _manifests()


def _json_text(value, allow_nan: bool) -> str:
    try:
        return json.dumps(value, allow_nan=allow_nan)
    except ValueError:
        return json.dumps(value, allow_nan=True)


@functools.cache
def strings() -> st.SearchStrategy[str]:
    """Any text an attribute may carry: short junk, the nasty list, JSON (valid or not), giant strings."""
    return st.one_of(
        st.text(max_size=40),
        st.sampled_from(NASTY_STRINGS),
        st.builds(_json_text, st.one_of(messages(), manifests(), json_values()), st.booleans()),
        st.builds(lambda text, cut: text[:cut], st.builds(json.dumps, messages()), st.integers(0, 200)),
        giant_strings(),
    )


def nested_any_value(depth: int, leaf: str = "x", into: AnyValue | None = None) -> AnyValue:
    """An AnyValue of arrays and kvlists nested ``depth`` deep, built in ``into`` when given (copying a
    value nested past protobuf's recursion limit fails) and iteratively (no recursion here)."""
    root = AnyValue() if into is None else into
    node = root
    for level in range(depth):
        if level % 2:
            node = node.kvlist_value.values.add(key=f"k{level}").value
        else:
            node = node.array_value.values.add()
    node.string_value = leaf
    return root


@functools.cache
def any_values(max_leaves: int = 12) -> st.SearchStrategy[AnyValue]:
    leaves = st.one_of(
        st.builds(lambda text: AnyValue(string_value=text), strings()),
        st.builds(lambda number: AnyValue(int_value=number), INT64),
        st.builds(
            lambda number: AnyValue(double_value=number), st.floats(allow_nan=True, allow_infinity=True)
        ),
        st.builds(lambda flag: AnyValue(bool_value=flag), st.booleans()),
        st.builds(lambda data: AnyValue(bytes_value=data), st.binary(max_size=40)),
        st.just(AnyValue()),  # no value set at all
        st.builds(nested_any_value, st.integers(1, 40)),
    )

    def extend(children):
        # Copying a child nested past protobuf's recursion limit fails: such a child is left out
        # (nested_any_value makes the deepest values, in place).
        def array(values):
            value = AnyValue()
            for child in values:
                with contextlib.suppress(DecodeError):
                    value.array_value.values.append(child)
            return value

        def kvlist(pairs):
            value = AnyValue()
            for key, child in pairs:
                with contextlib.suppress(DecodeError):
                    value.kvlist_value.values.append(KeyValue(key=key, value=child))
            return value

        return st.one_of(
            st.builds(array, st.lists(children, max_size=5)),
            st.builds(kvlist, st.lists(st.tuples(keys(), children), max_size=5)),
        )

    return st.recursive(leaves, extend, max_leaves=max_leaves)


@functools.cache
def keys() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(KEYS),
        st.builds(
            lambda prefix, index, tail: ".".join(part for part in (prefix, index, tail) if part),
            st.sampled_from(FLATTENED_PREFIXES),
            digits(),
            st.sampled_from(FLATTENED_TAILS),
        ),
        st.text(max_size=20),
        st.sampled_from(["", "\x00", "a" * 10_000]),
    )


def _attribute_value(key: str, draw) -> AnyValue:
    """Values that fit what the key is read for most of the time, anything at all otherwise."""
    if draw(st.integers(0, 3)) == 0:
        return draw(any_values())
    if key in (
        otel_genai.INPUT_MESSAGES,
        otel_genai.OUTPUT_MESSAGES,
        otel_genai.SYSTEM_INSTRUCTIONS,
        otel_genai.TOOL_DEFINITIONS,
    ):
        return AnyValue(
            string_value=draw(st.one_of(st.builds(_json_text, messages(), st.booleans()), strings()))
        )
    if key == semconv.CTXVIEW_MANIFEST:
        return AnyValue(
            string_value=draw(st.one_of(st.builds(_json_text, manifests(), st.booleans()), strings()))
        )
    if key == semconv.OPERATION_NAME:
        return AnyValue(string_value=draw(st.sampled_from(OPERATIONS)))
    if (
        key
        in families.INPUT_TOKENS
        + families.OUTPUT_TOKENS
        + families.CACHE_READ_TOKENS
        + families.CACHE_WRITE_TOKENS
        + (semconv.CTXVIEW_TURN,)
    ):
        return draw(
            st.one_of(
                st.builds(lambda number: AnyValue(int_value=number), INT64),
                st.builds(
                    lambda text: AnyValue(string_value=text),
                    st.one_of(digits(), st.integers(0, 2**80).map(str)),
                ),
                st.builds(lambda number: AnyValue(double_value=number), st.floats()),
            )
        )
    return draw(any_values())


def add_all(repeated, values) -> None:
    """Append each value that protobuf can copy (one nested past its recursion limit it cannot)."""
    for value in values:
        with contextlib.suppress(DecodeError):
            repeated.append(value)


@st.composite
def attributes(draw, max_size: int = 12) -> list[KeyValue]:
    result = []
    for _ in range(draw(st.integers(0, max_size))):
        key = draw(keys())
        with contextlib.suppress(DecodeError):
            result.append(KeyValue(key=key, value=_attribute_value(key, draw)))
    if draw(st.integers(0, 20)) == 0:  # a huge attribute count
        count = draw(st.integers(1000, 20_000))
        result.extend(KeyValue(key=f"k{n}", value=AnyValue(int_value=n)) for n in range(count))
    return result


@functools.cache
def ids(size: int) -> st.SearchStrategy[bytes]:
    return st.one_of(
        st.binary(min_size=size, max_size=size), st.binary(max_size=size + 2), st.just(bytes(size))
    )


@st.composite
def trace_requests(draw) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    trace_ids = draw(st.lists(ids(16), min_size=1, max_size=3))
    for _ in range(draw(st.integers(0, 2))):
        resource_spans = request.resource_spans.add()
        add_all(resource_spans.resource.attributes, draw(attributes(max_size=3)))
        for _ in range(draw(st.integers(0, 2))):
            scope_spans = resource_spans.scope_spans.add()
            scope_spans.scope.name = draw(
                st.one_of(
                    st.sampled_from(
                        [
                            "openinference.instrumentation.bedrock",
                            "pydantic-ai",
                            "opentelemetry.instrumentation.anthropic",
                        ]
                    ),
                    st.text(max_size=300),
                )
            )
            scope_spans.scope.version = draw(
                st.one_of(st.sampled_from(["0.1.0", "0.33.0", "9" * 200]), st.text(max_size=200))
            )
            for _ in range(draw(st.integers(0, 4))):
                span = scope_spans.spans.add()
                span.trace_id = draw(st.sampled_from(trace_ids))
                span.span_id = draw(ids(8))
                span.parent_span_id = draw(st.one_of(st.just(b""), ids(8)))
                span.name = draw(
                    st.one_of(
                        st.sampled_from(["chat m", "agent run", "execute_tool t"]), st.text(max_size=50)
                    )
                )
                span.kind = draw(st.integers(0, 5))
                span.start_time_unix_nano = draw(UINT64)
                span.end_time_unix_nano = draw(UINT64)
                span.attributes.add(key=semconv.OPERATION_NAME).value.string_value = draw(
                    st.sampled_from(OPERATIONS)
                )
                add_all(span.attributes, draw(attributes()))
                for _ in range(draw(st.integers(0, 2))):
                    event = span.events.add()
                    event.name = draw(st.sampled_from(EVENT_NAMES))
                    event.time_unix_nano = draw(UINT64)
                    add_all(event.attributes, draw(attributes(max_size=4)))
                if draw(st.integers(0, 4)) == 0:
                    link = span.links.add()
                    link.trace_id, link.span_id = draw(ids(16)), draw(ids(8))
                    add_all(link.attributes, draw(attributes(max_size=2)))
                span.status.code = draw(st.integers(0, 2))
                span.status.message = draw(strings())
    return request


@st.composite
def logs_requests(draw) -> ExportLogsServiceRequest:
    request = ExportLogsServiceRequest()
    for _ in range(draw(st.integers(0, 2))):
        resource_logs = request.resource_logs.add()
        add_all(resource_logs.resource.attributes, draw(attributes(max_size=3)))
        scope_logs = resource_logs.scope_logs.add()
        scope_logs.scope.name = draw(st.text(max_size=300))
        for _ in range(draw(st.integers(0, 4))):
            record = scope_logs.log_records.add()
            record.time_unix_nano = draw(UINT64)
            record.observed_time_unix_nano = draw(UINT64)
            record.trace_id = draw(st.one_of(st.just(b""), ids(16)))
            record.span_id = draw(st.one_of(st.just(b""), ids(8)))
            record.event_name = draw(st.one_of(st.sampled_from(EVENT_NAMES), st.text(max_size=300)))
            record.severity_number = draw(st.integers(0, 24))
            record.severity_text = draw(st.text(max_size=80))
            add_all(record.attributes, draw(attributes(max_size=4)))
            if draw(st.booleans()):
                body = draw(
                    st.one_of(
                        any_values(),
                        st.builds(lambda m: AnyValue(string_value=_json_text(m, True)), messages()),
                    )
                )
                record.body.CopyFrom(body)
    return request


# --- Bytes on the wire ---------------------------------------------------------------------------

MARK = "\x01MARKER\x01"


@st.composite
def damaged(draw, data: bytes) -> bytes:
    """The bytes as they are, truncated, with bytes flipped, or with junk added."""
    how = draw(st.sampled_from(["as is", "as is", "truncate", "flip", "append", "prepend"]))
    if how == "truncate" and data:
        return data[: draw(st.integers(0, len(data) - 1))]
    if how == "flip" and data:
        data = bytearray(data)
        for _ in range(draw(st.integers(1, 8))):
            data[draw(st.integers(0, len(data) - 1))] ^= 1 << draw(st.integers(0, 7))
        return bytes(data)
    if how == "append":
        return data + draw(st.binary(min_size=1, max_size=20))
    if how == "prepend":
        return draw(st.binary(min_size=1, max_size=20)) + data
    return data


def invalid_utf8(data: bytes) -> bytes:
    """A protobuf string field made invalid UTF-8 in place (same length, so the framing stays valid)."""
    return data.replace(MARK.encode(), b"\xff\xfe\xc0\x80\xed\xa0\x80\x01")


def compress(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        compressor = zlib.compressobj(1, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
        return compressor.compress(data) + compressor.flush()
    if encoding == "deflate":
        return zlib.compress(data, 1)
    return data


OTLP_JSON_KEYS = [
    "resourceSpans",
    "resourceLogs",
    "scopeSpans",
    "scopeLogs",
    "spans",
    "logRecords",
    "traceId",
    "spanId",
    "parentSpanId",
    "attributes",
    "key",
    "value",
    "stringValue",
    "intValue",
    "doubleValue",
    "boolValue",
    "bytesValue",
    "arrayValue",
    "kvlistValue",
    "values",
    "startTimeUnixNano",
    "timeUnixNano",
    "body",
    "events",
    "links",
    "name",
]


@functools.cache
def otlp_json_like() -> st.SearchStrategy:
    """JSON documents made of OTLP's field names with values of any type."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(),
        st.text(max_size=20),
        st.sampled_from(NASTY_STRINGS),
        st.sampled_from(["00" * 16, "00" * 8, "ab" * 16, base64.b64encode(b"x" * 16).decode(), "zz" * 8]),
    )
    return st.recursive(
        leaves,
        lambda children: st.one_of(
            st.lists(children, max_size=4),
            st.dictionaries(st.sampled_from(OTLP_JSON_KEYS), children, max_size=5),
        ),
        max_leaves=40,
    )


# --- Fixed shapes --------------------------------------------------------------------------------


def base64_to_hex(value: str) -> str:
    return base64.b64decode(value).hex()


def nested_any_value_json(depth: int) -> str:
    """The OTLP/JSON of ``nested_any_value(depth)``, written as text (json_format recurses)."""
    opening, closing = [], []
    for level in range(depth):
        if level % 2:
            opening.append('{"kvlistValue": {"values": [{"key": "k", "value": ')
            closing.append("}]}}")
        else:
            opening.append('{"arrayValue": {"values": [')
            closing.append("]}}")
    return "".join(opening) + '{"stringValue": "x"}' + "".join(reversed(closing))


def request_with_attribute(signal: str, key: str, nested: int = 0, text: str = ""):
    """A valid one-span (or one-record) request whose attribute ``key`` is ``text`` or, with ``nested``,
    an AnyValue nested that deep."""
    if signal == "traces":
        request = ExportTraceServiceRequest()
        span = request.resource_spans.add().scope_spans.add().spans.add()
        span.trace_id, span.span_id, span.name = b"\x01" * 16, b"\x02" * 8, "chat"
        span.attributes.add(key="gen_ai.operation.name").value.string_value = "chat"
        attribute = span.attributes.add(key=key)
    else:
        request = ExportLogsServiceRequest()
        record = request.resource_logs.add().scope_logs.add().log_records.add()
        record.time_unix_nano = 1
        attribute = record.attributes.add(key=key)
    if nested:
        nested_any_value(nested, into=attribute.value)
    else:
        attribute.value.string_value = text
    return request


def large_request(shape: str, size: int) -> ExportTraceServiceRequest:
    """A traces request of about ``size`` bytes made of one kind of bulk."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()

    def new_span(number: int):
        span = scope.spans.add()
        span.trace_id, span.span_id = b"\x01" * 16, number.to_bytes(8, "big")
        span.name = "bulk"
        return span

    if shape == "attributes":
        span = new_span(1)
        span.attributes.extend(KeyValue(key=f"k{n}", value=AnyValue(int_value=n)) for n in range(size // 16))
    elif shape == "spans":
        for number in range(1, size // 60):
            new_span(number).attributes.append(KeyValue(key="n", value=AnyValue(int_value=number)))
    elif shape == "nested":
        span = new_span(1)
        value = nested_any_value(30)
        count = size // value.ByteSize()
        span.attributes.extend(KeyValue(key=f"k{n}", value=value) for n in range(count))
    else:
        new_span(1).attributes.append(KeyValue(key="big", value=AnyValue(string_value="x" * size)))
    return request
