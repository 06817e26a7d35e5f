from django.apps import AppConfig


class CtxviewConfig(AppConfig):
    name = "ctxview"
    verbose_name = "ctxview"
