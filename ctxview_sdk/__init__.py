"""ctxview SDK: record what an LLM agent put in each model call's context window, and send it to ctxview.

    import ctxview_sdk
    ctxview_sdk.configure("http://127.0.0.1:8000", key="cvk_...")
    ctxview_sdk.record_anthropic("run-42", turn=3, request=request, response=response)

Importable without Django; needs only opentelemetry-sdk and opentelemetry-exporter-otlp-proto-http (and
ctxview's pure core, ``ctxcore``, which ships with it).
See README.md for usage and CONVENTION.md for what goes on the wire.
"""

from ctxcore.vocabulary import BUCKETS, KINDS, MODES, ROLES

from .call import Call, call
from .config import configure, flush, shutdown
from .manifest import (
    REASONS,
    SCHEMA,
    TRUSTS,
    Excluded,
    Item,
    content_hash,
    message_id,
    render,
)
from .record import ask_cache_diagnostics, record_anthropic, record_openai
from .tokens import estimate_tokens
from .usage import usage_attributes
from .version import __version__

__all__ = [
    "BUCKETS",
    "KINDS",
    "MODES",
    "REASONS",
    "ROLES",
    "SCHEMA",
    "TRUSTS",
    "Call",
    "Excluded",
    "Item",
    "__version__",
    "ask_cache_diagnostics",
    "call",
    "configure",
    "content_hash",
    "estimate_tokens",
    "flush",
    "message_id",
    "record_anthropic",
    "record_openai",
    "render",
    "shutdown",
    "usage_attributes",
]
