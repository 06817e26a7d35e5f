import pytest
from django.core.exceptions import ImproperlyConfigured

from ctxview.env import database_from_url, env_bool, env_int, env_str


def test_env_bool_rejects_junk(monkeypatch):
    monkeypatch.setenv("X_FLAG", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_FLAG='maybe' is not a boolean"):
        env_bool("X_FLAG", False)
    monkeypatch.setenv("X_FLAG", "Yes")
    assert env_bool("X_FLAG", False) is True


def test_env_int_rejects_junk_and_small_values(monkeypatch):
    monkeypatch.setenv("X_NUM", "12k")
    with pytest.raises(ImproperlyConfigured, match="not a whole number"):
        env_int("X_NUM", 1)
    monkeypatch.setenv("X_NUM", "3")
    with pytest.raises(ImproperlyConfigured, match="must be at least 10"):
        env_int("X_NUM", 20, minimum=10)


def test_env_str_reads_a_file(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("X_SECRET_FILE", str(secret))
    assert env_str("X_SECRET") == "s3cret"
    monkeypatch.setenv("X_SECRET_FILE", str(tmp_path / "missing"))
    with pytest.raises(ImproperlyConfigured, match="cannot be read"):
        env_str("X_SECRET")


def test_database_from_url():
    config = database_from_url("postgres://u:p%40ss@db.example:5433/ctx")
    assert (config["NAME"], config["USER"], config["PASSWORD"], config["HOST"], config["PORT"]) == (
        "ctx",
        "u",
        "p@ss",
        "db.example",
        "5433",
    )
    assert database_from_url("sqlite:////tmp/x.sqlite3")["NAME"] == "/tmp/x.sqlite3"
    with pytest.raises(ImproperlyConfigured, match="only postgres"):
        database_from_url("mysql://x/y")
    with pytest.raises(ImproperlyConfigured, match="names no database"):
        database_from_url("postgres://host/")
