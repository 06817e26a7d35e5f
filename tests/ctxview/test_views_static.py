"""Rules the templates and static files keep: our own plotly, no inline scripts, no |safe on trace data."""

import hashlib
import re
from pathlib import Path

import plotly

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = sorted((ROOT / "templates").rglob("*.html"))


def test_the_vendored_plotly_is_the_pinned_packages():
    ours = (ROOT / "static" / "vendor" / "plotly.min.js").read_bytes()
    theirs = (Path(plotly.__file__).parent / "package_data" / "plotly.min.js").read_bytes()
    assert hashlib.sha256(ours).hexdigest() == hashlib.sha256(theirs).hexdigest(), (
        "static/vendor/plotly.min.js differs from the installed plotly package: copy it again"
    )


def test_no_template_has_an_inline_script_a_cdn_or_marks_anything_safe():
    for path in TEMPLATES:
        text = path.read_text()
        for tag in re.findall(r"<script[^>]*>", text):
            assert "src=" in tag, f"{path.name}: inline <script> ({tag})"
        assert "|safe" not in text and "autoescape off" not in text, path.name
        # Nothing loaded from elsewhere (a URL in a placeholder or a link to docs is fine).
        assert not re.search(r"<(script|link|img|iframe)[^>]*(src|href)=[\"']?(https?:)?//", text), path.name
        assert not re.search(r"<[^>]*\son[a-z]+\s*=", text), f"{path.name}: inline event handler"


def test_no_static_script_is_fetched_from_elsewhere():
    for path in (ROOT / "static" / "ctxview").glob("*.js"):
        assert "http://" not in path.read_text() and "https://" not in path.read_text(), path.name
