"""A Gemini ``streamGenerateContent`` stream through the proxy: the client gets the fake's bytes as they
come, and the recorded span has the stream's usage and output, reassembled from its chunks.

The fake here streams as the Gemini API does with ``alt=sse``: chunked, one ``data:`` event per chunk,
separated by CRLF pairs, each chunk a whole ``GenerateContentResponse`` (usage on the first and the last).
"""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest
from google import genai

from ctxview.proxy.server import Proxy, Running
from tests.proxy.conftest import PROVIDER_KEY

MODEL = "gemini-2.5-flash"
STREAM_PATH = f"/v1beta/models/{MODEL}:streamGenerateContent"
SYSTEM = "You are terse."
QUESTION = "When is the deploy window?"


def chunk(parts: list[dict], **extra) -> dict:
    candidate = {"content": {"role": "model", "parts": parts}, "index": 0}
    if "finishReason" in extra:
        candidate["finishReason"] = extra.pop("finishReason")
    return {"candidates": [candidate], "modelVersion": f"{MODEL}-001", "responseId": "resp-g1"} | extra


CHUNKS = [
    chunk(
        [{"text": "Checking the calendar.", "thought": True}],
        usageMetadata={"promptTokenCount": 1200, "cachedContentTokenCount": 1024, "totalTokenCount": 1200},
    ),
    chunk([{"text": "The deploy window"}]),
    chunk([{"text": " is Tuesday."}]),
    chunk(
        [{"functionCall": {"name": "read_file", "args": {"path": "notes.txt"}}}],
        finishReason="STOP",
        usageMetadata={
            "promptTokenCount": 1200,
            "cachedContentTokenCount": 1024,
            "candidatesTokenCount": 14,
            "thoughtsTokenCount": 20,
            "totalTokenCount": 1234,
        },
    ),
]
EVENTS = [b"data: " + json.dumps(body).encode() + b"\r\n\r\n" for body in CHUNKS]


class GeminiStream:
    """Streams EVENTS to every POST, as HTTP/1.1 chunks; after the first it waits for ``hold`` if set."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.hold: threading.Event | None = None
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                fake.requests.append((self.path, dict(self.headers.items()), body))
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for number, event in enumerate(EVENTS):
                    self.wfile.write(f"{len(event):x}\r\n".encode() + event + b"\r\n")
                    self.wfile.flush()
                    if number == 0 and fake.hold is not None:
                        fake.hold.wait(10)
                self.wfile.write(b"0\r\n\r\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def gemini():
    fake = GeminiStream()
    yield fake
    fake.stop()


@pytest.fixture
def gemini_proxy(gemini, recorder):
    running = Running(Proxy({"gemini": gemini.url}, recorder.submit, salt=b"test-salt")).start()
    yield running
    running.stop()


def recorded(recorder, proxy) -> list[dict]:
    assert proxy.settled() and recorder.flush(10)
    return [span["attributes"] for _name, span in recorder.spool.oldest(1000)]


REQUEST = {
    "systemInstruction": {"parts": [{"text": SYSTEM}]},
    "contents": [{"role": "user", "parts": [{"text": QUESTION}]}],
    "generationConfig": {"maxOutputTokens": 256, "temperature": 0.2},
}


def test_a_gemini_stream_reaches_the_client_as_sent_and_is_recorded(gemini, gemini_proxy, recorder, spool):
    gemini.hold = threading.Event()
    url = f"{gemini_proxy.url}/gemini{STREAM_PATH}?alt=sse&key={PROVIDER_KEY}"
    with httpx.stream("POST", url, json=REQUEST, timeout=10) as response:
        chunks = response.iter_raw()
        first = b""
        while b"\r\n\r\n" not in first:
            first += next(chunks)
        assert first == EVENTS[0]  # before the fake sent the rest
        gemini.hold.set()
        received = first + b"".join(chunks)
    assert response.status_code == 200
    assert received == b"".join(EVENTS)
    ((path, _headers, body),) = gemini.requests
    assert path == f"{STREAM_PATH}?alt=sse&key={PROVIDER_KEY}"  # the query as the client sent it
    assert json.loads(body) == REQUEST

    (call,) = recorded(recorder, gemini_proxy)
    assert call["gen_ai.provider.name"] == "gcp.gemini"
    assert call["gen_ai.request.stream"] is True
    assert (call["gen_ai.request.model"], call["gen_ai.response.model"]) == (MODEL, "gemini-2.5-flash-001")
    assert call["gen_ai.response.id"] == "resp-g1"
    assert call["gen_ai.request.max_tokens"] == 256
    # promptTokenCount includes the cached content; the output includes the thoughts.
    assert call["gen_ai.usage.input_tokens"] == 1200
    assert call["gen_ai.usage.cache_read.input_tokens"] == 1024
    assert call["gen_ai.usage.cache_creation.input_tokens"] == 0
    assert call["gen_ai.usage.output_tokens"] == 14 + 20
    assert call["gen_ai.usage.reasoning.output_tokens"] == 20
    assert call["gen_ai.response.finish_reasons"] == ["stop"]
    assert json.loads(call["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "content": "Checking the calendar."},
                {"type": "text", "content": "The deploy window is Tuesday."},
                {"type": "tool_call", "id": None, "name": "read_file", "arguments": {"path": "notes.txt"}},
            ],
            "finish_reason": "stop",
        }
    ]
    assert json.loads(call["gen_ai.system_instructions"]) == [{"type": "text", "content": SYSTEM}]
    assert json.loads(call["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}
    ]
    assert call["ctxview.proxy.key_hash"]  # the key from the query, kept only as its hash
    for file in spool.directory.iterdir():
        assert PROVIDER_KEY.encode() not in file.read_bytes()


def test_the_google_genai_client_streams_through_the_proxy(gemini, gemini_proxy, recorder):
    client = genai.Client(api_key=PROVIDER_KEY, http_options={"base_url": gemini_proxy.url + "/gemini"})
    stream = client.models.generate_content_stream(
        model=MODEL, contents=QUESTION, config={"system_instruction": SYSTEM, "max_output_tokens": 256}
    )
    texts = [part.text for response in stream for part in response.candidates[0].content.parts if part.text]
    assert texts == ["Checking the calendar.", "The deploy window", " is Tuesday."]
    ((path, headers, _body),) = gemini.requests
    assert path == STREAM_PATH + "?alt=sse"
    assert {name.lower(): value for name, value in headers.items()}["x-goog-api-key"] == PROVIDER_KEY

    (call,) = recorded(recorder, gemini_proxy)
    assert call["gen_ai.usage.output_tokens"] == 34
    output = json.loads(call["gen_ai.output.messages"])
    assert output[0]["parts"][1]["content"] == "The deploy window is Tuesday."
