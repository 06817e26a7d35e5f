"""The recording proxy: agents talk to their provider through it, and each call becomes a GenAI span.

No Django here. It is a process of its own (``python -m ctxview.proxy``, soon ``ctxview proxy``):
``server`` forwards ``/anthropic/...``, ``/openai/...`` and ``/gemini/...`` to fixed upstreams, byte for
byte and stream by stream; once an answer has gone back, ``record`` turns the exchange into span
attributes in the OTel GenAI conventions, ``runs`` names its run and agent, and ``spool`` keeps the spans
on disk until the OpenTelemetry SDK's OTLP/HTTP exporter has delivered them to a ctxview receiver.
"""
