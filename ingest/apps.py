from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "ingest"
    verbose_name = "Ingest"

    def ready(self) -> None:
        from ingest import lookups  # noqa: F401  (registers ``field__any_of`` on CharField)
