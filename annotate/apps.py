from django.apps import AppConfig


class AnnotateConfig(AppConfig):
    name = "annotate"
    verbose_name = "Annotations"

    def ready(self) -> None:
        from annotate import receivers  # noqa: F401  (connects the import signal)
