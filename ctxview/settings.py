"""Django settings for ctxview.

With no environment at all ctxview runs embedded: SQLite in ./var, Celery tasks run in-process.
``DATABASE_URL`` selects PostgreSQL; ``CELERY_BROKER_URL`` selects Redis or RabbitMQ and real workers.
"""

import secrets
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from ctxview.env import database_from_url, env_bool, env_int, env_list, env_str, sqlite_database

BASE_DIR = Path(__file__).resolve().parent.parent
DATA_DIR = Path(env_str("CTXVIEW_DATA_DIR", str(BASE_DIR / "var")))
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _embedded_secret_key() -> str:
    # Embedded mode keeps a generated key in the data folder, so sessions survive restarts
    # without anyone having to invent a secret.
    path = DATA_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env_str("CTXVIEW_SECRET_KEY") or _embedded_secret_key()
DEBUG = env_bool("CTXVIEW_DEBUG", False)
# Defaults our own files once shipped, and placeholders from the docs: anyone can sign sessions with them.
KNOWN_SECRET_KEYS = {"change-me", "changeme", "build", "secret", "...", "…"}
if not DEBUG and (SECRET_KEY in KNOWN_SECRET_KEYS or SECRET_KEY.startswith("django-insecure")):
    raise ImproperlyConfigured(
        f"CTXVIEW_SECRET_KEY={SECRET_KEY!r} is a published default: set a long random one, e.g. "
        "python -c 'import secrets; print(secrets.token_urlsafe(50))' (or leave it unset on one machine: "
        "ctxview then generates one into CTXVIEW_DATA_DIR)"
    )
ALLOWED_HOSTS = env_list("CTXVIEW_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CTXVIEW_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.admin",
    "template_partials",
    "django_htmx",
    # Swagger UI's files as static files, for the API reference at /api/v1/docs (no CDN).
    "drf_spectacular_sidecar",
    "ingest",
    "ctxview",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "ctxview.security.SecurityHeadersMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # A personal API token (Bearer cvt_…) under /api/v1/: its user replaces the session's, and the
    # request is marked exempt from CSRF before CsrfViewMiddleware checks it (a header is no cookie).
    "ctxview.tokens.ApiTokenMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last: the 400 page it may answer with uses the user and htmx details set above.
    "ctxview.security.UntrustedInputMiddleware",
]

ROOT_URLCONF = "ctxview.urls"
WSGI_APPLICATION = "ctxview.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

_database_url = env_str("DATABASE_URL")
DATABASES = {
    "default": database_from_url(_database_url)
    if _database_url
    else sqlite_database(DATA_DIR / "ctxview.sqlite3")
}
# Behind PgBouncer in transaction pooling, each transaction of a connection may run on another server
# connection: a server-side cursor (QuerySet.iterator() outside a transaction, fetched a chunk a
# transaction) is then gone at its next fetch ("cursor ... does not exist"). Django fetches such results
# client-side instead. (Prepared statements are off already: Django's psycopg default.)
CTXVIEW_PGBOUNCER = env_bool("CTXVIEW_PGBOUNCER", False)
if CTXVIEW_PGBOUNCER and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "cv-login"
LOGIN_REDIRECT_URL = "cv-projects"
LOGOUT_REDIRECT_URL = "cv-login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(env_str("CTXVIEW_STATIC_ROOT", str(DATA_DIR / "static")))
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
# Serve straight from the source folders when collectstatic has not been run (tests, a fresh clone).
WHITENOISE_USE_FINDERS = True
# collectstatic also writes gzip and brotli copies (plotly.min.js: 4.8 MB, 1.5 MB gzipped) that WhiteNoise
# serves to browsers that accept them. No manifest: the embedded mode works without collectstatic.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

SESSION_COOKIE_HTTPONLY = True
X_FRAME_OPTIONS = "DENY"
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Behind HTTPS (directly or through a proxy that sets X-Forwarded-Proto): secure cookies, HSTS, redirects.
CTXVIEW_HTTPS = env_bool("CTXVIEW_HTTPS", False)
SESSION_COOKIE_SECURE = env_bool("CTXVIEW_SECURE_COOKIES", CTXVIEW_HTTPS)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = CTXVIEW_HTTPS
SECURE_HSTS_SECONDS = env_int("CTXVIEW_HSTS_SECONDS", 31_536_000 if CTXVIEW_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = CTXVIEW_HTTPS
SECURE_HSTS_PRELOAD = CTXVIEW_HTTPS
if env_bool("CTXVIEW_TRUST_X_FORWARDED_PROTO", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
# The OTLP receiver is for agents over plain HTTP inside a network too: never redirect it.
SECURE_REDIRECT_EXEMPT = [r"^v1/"]

_cache_url = env_str("CTXVIEW_CACHE_URL")
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": _cache_url}
    if _cache_url
    else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
}

# Failed logins per user and per address within the window; beyond, the login page answers 429 (0: off).
CTXVIEW_LOGIN_MAX_FAILURES_PER_USER = env_int("CTXVIEW_LOGIN_MAX_FAILURES_PER_USER", 5)
CTXVIEW_LOGIN_MAX_FAILURES_PER_ADDRESS = env_int("CTXVIEW_LOGIN_MAX_FAILURES_PER_ADDRESS", 30)
CTXVIEW_LOGIN_WINDOW_SECONDS = env_int("CTXVIEW_LOGIN_WINDOW_SECONDS", 900, minimum=1)
# Behind a proxy that sets X-Forwarded-For to the client's address (deploy/nginx): count that address.
CTXVIEW_TRUST_X_FORWARDED_FOR = env_bool("CTXVIEW_TRUST_X_FORWARDED_FOR", False)

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "loggers": {
        "ingest": {"handlers": ["console"], "level": env_str("CTXVIEW_LOG_LEVEL", "INFO")},
        "ctxview": {"handlers": ["console"], "level": env_str("CTXVIEW_LOG_LEVEL", "INFO")},
        # A 500 with its traceback. Django's own default sends these only to mail_admins (no admins
        # here) and to a console handler that works in DEBUG alone, so a server error left no trace.
        "django.request": {"handlers": ["console"], "level": "ERROR", "propagate": False},
    },
}

# --- Ingest --------------------------------------------------------------------------------------
# The body as sent (possibly compressed) may not exceed this; nor may it once decompressed.
CTXVIEW_INGEST_MAX_BODY_BYTES = env_int("CTXVIEW_INGEST_MAX_BODY_BYTES", 16 * 1024 * 1024, minimum=1024)
CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES = env_int(
    "CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES", 64 * 1024 * 1024, minimum=1024
)
# Bytes of bodies (as read and decompressed) one web process holds at once; beyond it, 503 + Retry-After.
# One request alone may pass it (its own limits bound it), so a low value refuses nothing forever.
CTXVIEW_INGEST_MAX_INFLIGHT_BYTES = env_int(
    "CTXVIEW_INGEST_MAX_INFLIGHT_BYTES", 2 * CTXVIEW_INGEST_MAX_DECOMPRESSED_BYTES, minimum=1024
)
# Backpressure: above this many batches waiting to be processed the receiver answers 503.
# 0 switches the check off.
CTXVIEW_INGEST_MAX_PENDING_BATCHES = env_int("CTXVIEW_INGEST_MAX_PENDING_BATCHES", 20_000)
CTXVIEW_INGEST_RETRY_AFTER_SECONDS = env_int("CTXVIEW_INGEST_RETRY_AFTER_SECONDS", 5, minimum=1)
# Requests per second one ingest key may make (0: no limit); beyond it, 503 with Retry-After: 1.
CTXVIEW_INGEST_RATE_LIMIT = env_int("CTXVIEW_INGEST_RATE_LIMIT", 200)
# The sweeper re-enqueues batches that have waited longer than this (e.g. the broker was down).
CTXVIEW_SWEEP_AFTER_SECONDS = env_int("CTXVIEW_SWEEP_AFTER_SECONDS", 60)
# A transaction holding the write side's locks ends if its worker falls silent this long between two
# statements (ingest/locks.py): a lost worker host does not hold up others' batches for longer.
CTXVIEW_LOCK_IDLE_SECONDS = env_int("CTXVIEW_LOCK_IDLE_SECONDS", 30)

# --- OTLP/gRPC receiver (python manage.py serve_otlp_grpc) ---------------------------------------
# Where it listens (4317 is OTLP/gRPC's default port) and how many requests it handles at once, each
# thread with its own database connection.
CTXVIEW_GRPC_BIND = env_str("CTXVIEW_GRPC_BIND", "127.0.0.1:4317")
CTXVIEW_GRPC_THREADS = env_int("CTXVIEW_GRPC_THREADS", 8, minimum=1)
# TLS: the PEM certificate (chain) and private key, given inline or as files (CTXVIEW_GRPC_TLS_CERT_FILE,
# CTXVIEW_GRPC_TLS_KEY_FILE). Neither: plain gRPC.
CTXVIEW_GRPC_TLS_CERT = env_str("CTXVIEW_GRPC_TLS_CERT")
CTXVIEW_GRPC_TLS_KEY = env_str("CTXVIEW_GRPC_TLS_KEY")
if bool(CTXVIEW_GRPC_TLS_CERT) != bool(CTXVIEW_GRPC_TLS_KEY):
    raise ImproperlyConfigured("CTXVIEW_GRPC_TLS_CERT and CTXVIEW_GRPC_TLS_KEY go together: set both or none")

# --- Celery --------------------------------------------------------------------------------------
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL")
# No broker means embedded: tasks run in-process, at the moment they are enqueued.
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
CELERY_TASK_EAGER_PROPAGATES = False
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# The broker queue of ctxview's tasks: instances sharing a broker each need their own.
CELERY_TASK_DEFAULT_QUEUE = env_str("CTXVIEW_TASK_QUEUE") or "celery"
CELERY_TASK_TIME_LIMIT = env_int("CTXVIEW_TASK_TIME_LIMIT", 300, minimum=10)
CELERY_TASK_SOFT_TIME_LIMIT = int(CELERY_TASK_TIME_LIMIT * 0.9)
# With late acks on Redis a task running past the visibility timeout is delivered again.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(CELERY_TASK_TIME_LIMIT * 1.1),
    "socket_connect_timeout": 2,
    "socket_timeout": 5,
}
# A receiver must answer quickly even when the broker is down: the batch is already stored and the
# sweeper will enqueue it later, so do not wait long for the broker.
CELERY_BROKER_CONNECTION_TIMEOUT = 2
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 1,
    "interval_start": 0,
    "interval_step": 0.2,
    "interval_max": 0.2,
}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fixup closes the database connection around every task, whatever CONN_MAX_AGE says
# (celery/celery#4116, #9824): a new PostgreSQL backend per task, its catalog caches cold. It closes
# them only every this many tasks; between, ctxview.celery closes what is obsolete or broken, as a
# request does.
CELERY_DB_REUSE_MAX = 1000
CELERY_BEAT_SCHEDULE = {
    "sweep-pending-batches": {"task": "ingest.tasks.sweep_batches_task", "schedule": 60.0},
    "apply-retention": {"task": "ingest.tasks.apply_retention_task", "schedule": 3600.0},
    "create-partitions": {"task": "ingest.tasks.create_partitions_task", "schedule": 3600.0},
    "evaluate-monitors": {"task": "monitors.evaluate", "schedule": 60.0},
}

# --- Outbound calls (re-ask; ctxview/outbound.py) -------------------------------------------------
# Off: no project may set or use a model endpoint. On: a project may once an instance admin (a
# superuser) allowed it on the project's settings page or with `manage.py outbound allow SLUG`.
CTXVIEW_OUTBOUND_ENABLED = env_bool("CTXVIEW_OUTBOUND_ENABLED", False)
# Hosts or CIDR networks the server may call although they are loopback, link-local or private
# (e.g. a model gateway inside your network: "llm-gateway.corp,10.20.0.0/16").
CTXVIEW_OUTBOUND_ALLOW = env_list("CTXVIEW_OUTBOUND_ALLOW", [])
# Outbound jobs (one re-ask, all its answers) one process runs at once; a project runs one at a time.
CTXVIEW_OUTBOUND_MAX_CONCURRENT = env_int("CTXVIEW_OUTBOUND_MAX_CONCURRENT", 2, minimum=1)
# All the answers of one re-ask share this deadline, whatever the endpoint does.
CTXVIEW_REASK_DEADLINE_SECONDS = env_int("CTXVIEW_REASK_DEADLINE_SECONDS", 90, minimum=1)
# --- Replay (ctxview/replay.py) ------------------------------------------------------------------
# A replay's estimated cost (calls x policy steps x (1 + probes)) above which it is refused before it
# runs: the demo's 6 default policies with 20 probes on a 1,200-call run cost 151,200; 12 three-step
# policies with 20 probes on it (a flood, issue 30) cost 907,200.
CTXVIEW_MAX_REPLAY_COST = env_int("CTXVIEW_MAX_REPLAY_COST", 400_000, minimum=1)
# The run's content one request reads for its text and regex probes; past it they are unknown (partial).
CTXVIEW_MAX_SEARCHED_CHARS = env_int("CTXVIEW_MAX_SEARCHED_CHARS", 32_000_000, minimum=1)
# Replays one user (or ingest key) may compute a minute; answers from the cache are not counted. 429 past.
CTXVIEW_REPLAYS_PER_MINUTE = env_int("CTXVIEW_REPLAYS_PER_MINUTE", 6, minimum=1)
# Seals stored secrets (ctxview/sealing.py); by default derived from the secret key.
CTXVIEW_ENCRYPTION_KEY = env_str("CTXVIEW_ENCRYPTION_KEY")
# --- Monitors (ctxview/monitors/) -----------------------------------------------------------------
# The address people reach this instance at: the links in alerts (webhooks, Slack, email) start with it.
CTXVIEW_PUBLIC_URL = env_str("CTXVIEW_PUBLIC_URL") or "http://127.0.0.1:8000"
