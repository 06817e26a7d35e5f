from django.apps import AppConfig


class CtxviewConfig(AppConfig):
    name = "ctxview"
    verbose_name = "ctxview"

    def ready(self) -> None:
        # Load the Celery app with Django, so tasks are sent with ctxview's broker settings. Not in
        # ctxview/__init__.py: the pure packages under ctxview/ must import without Celery or Django.
        from ctxview import celery  # noqa: F401
