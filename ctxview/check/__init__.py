"""``ctxview check`` and the pytest plugin: the server's normalisation and analyses over OTLP files or
in-memory spans, and rules over the runs they make (for CI).

inputs.py reads OTLP files; engine.py runs the ingest pipeline over them in memory; server.py reads runs
from a server instead; rules.py, report.py and assertions.py are the rules, what the command writes and
what the plugin's tests assert; command.py is the command line (``ctxview.cli``).
"""
