import sys

from django.apps import AppConfig

# How often (seconds) Python hands the interpreter to a waiting thread; its default is 5 ms.
SWITCH_INTERVAL = 0.0002


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # A search computes its question's vector in a thread of its own while the request's
        # thread reads and decrypts (memory.relevance). numpy lets go of the interpreter for
        # each product and takes it back after; with the default interval each take waits on
        # the request's Python for up to 5 ms (docs/benchmarks.md, "R5").
        sys.setswitchinterval(SWITCH_INTERVAL)
