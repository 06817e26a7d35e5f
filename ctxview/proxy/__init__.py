"""The recording proxy: agents talk to their provider through it, and each call becomes a GenAI span.

No Django here. It is a process of its own (``python -m ctxview.proxy``, ``ctxview proxy``): ``server``
forwards ``/anthropic/...``, ``/openai/...`` and ``/gemini/...`` to fixed upstreams, byte for byte and
stream by stream, and only captures what passes (an ``exchange``). Once an answer has gone back, the
exchange goes through a pipe to the proxy's recording process (``recording``), where ``record`` turns it
into span attributes in the OTel GenAI conventions, ``runs`` names its run and agent, and ``spool`` keeps
the spans on disk until the OpenTelemetry SDK's OTLP/HTTP exporter has delivered them to a ctxview
receiver (``export``).
"""
