from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"
    verbose_name = "Judges and workers"

    def ready(self) -> None:
        from workers import receivers  # noqa: F401  (connects the signal receivers)
