"""A server error leaves its traceback in the log of the process that served it (before: in no log at
all, since Django sends them only to mail_admins and to a console handler that works in DEBUG alone).

Provoked for real: gunicorn serving ctxview with a database it cannot open."""

import os
import sys
import tempfile

import requests

from tests import services


def test_a_500_is_logged_with_its_traceback(tmp_path):
    missing = os.path.join(tempfile.gettempdir(), "ctxview-no-such-folder", "db.sqlite3")
    env = os.environ | {"DATABASE_URL": f"sqlite:///{missing}", "CTXVIEW_DATA_DIR": str(tmp_path)}
    env.pop("CTXVIEW_DEBUG", None)
    port = services.free_port()
    services.artifact("server-errors-web.log").unlink(missing_ok=True)  # this run's log only
    process = services.Process(
        "server-errors-web",
        [sys.executable, "-m", "gunicorn", "ctxview.wsgi:application", "-b", f"127.0.0.1:{port}"],
        env,
    )
    url = f"http://127.0.0.1:{port}"

    def log() -> str:
        return process.log_path.read_text(errors="replace")

    try:

        def answers():
            assert process.alive(), process.log()
            try:
                return requests.get(f"{url}/login/", timeout=5).status_code == 200
            except requests.RequestException:
                return False

        services.wait_for(answers, 60, "gunicorn to answer")
        session = requests.Session()
        session.get(f"{url}/login/", timeout=10)  # the CSRF cookie; no database needed yet
        response = session.post(
            f"{url}/login/",
            data={"username": "a", "password": "b", "csrfmiddlewaretoken": session.cookies["csrftoken"]},
            timeout=10,
        )
        assert response.status_code == 500
        services.wait_for(lambda: "Traceback" in log(), 10, "the traceback in the log")
        text = log()
        assert "ERROR django.request: Internal Server Error: /login/" in text
        assert "OperationalError: unable to open database file" in text
    finally:
        process.stop()
