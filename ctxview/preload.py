"""What a web process imports before it serves: at start-up, not on its first requests.

Django imports the URLconf (and with it every view), the template engines and the session and message
backends on the first request, and Celery its producer on the first task sent. Under gunicorn's
``preload_app`` the master imports this once, before forking, and its workers share the pages; without
it each worker imported about 250 modules on its first requests: a first OTLP request took 317 ms, now
47. Importing opens no database or broker connection, so nothing open is shared across a fork.
"""

from django.conf import settings
from django.template import engines
from django.urls import get_resolver
from django.utils.module_loading import import_string


def load_request_path() -> None:
    get_resolver().url_patterns  # noqa: B018  (the URLconf and every view module)
    for engine in engines.all():
        if hasattr(engine, "engine"):  # Django's templates: loaders and context processors are lazy
            engine.engine.template_loaders  # noqa: B018
            engine.engine.template_context_processors  # noqa: B018
    for backend in (
        settings.CACHES["default"]["BACKEND"],
        settings.MESSAGE_STORAGE,
        settings.SESSION_SERIALIZER,
        settings.SESSION_ENGINE + ".SessionStore",
    ):
        import_string(backend)
    "warm.up".encode("idna")  # the host check's codec
    _load_task_producer()


def _load_task_producer() -> None:
    from kombu import Connection
    from kombu.transport import resolve_transport
    from kombu.utils.imports import symbol_by_name

    from ctxview.celery import app

    app.amqp  # noqa: B018  (the producer and its routes)
    app.Task  # noqa: B018  (the Django task class)
    app.backend  # noqa: B018  (no result backend: the disabled one, which connects nothing)
    if settings.CELERY_BROKER_URL:
        # The transport's class only: Connection is lazy and the class connects nothing.
        symbol_by_name(resolve_transport(Connection(settings.CELERY_BROKER_URL).transport_cls))
    import celery.canvas  # noqa: F401
    import celery.events.dispatcher  # noqa: F401  (sending a task may send a task event)
    import celery.result  # noqa: F401
