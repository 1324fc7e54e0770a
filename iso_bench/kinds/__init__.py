"""Task kinds: the evaluators that iso-bench adds to mteb (one module per kind).

Importing this package is what makes every iso-bench task known: it imports ``iso_bench.tasks``
(the ``tasks/`` folder), whose files register their tasks in :data:`TASKS`.
"""

from __future__ import annotations

from iso_bench.kinds.base import TASKS, DataFormatError, IsoTask, RawSource, card

__all__ = ["TASKS", "DataFormatError", "IsoTask", "RawSource", "card", "load_all"]


def load_all() -> None:
    """Import every task definition (idempotent)."""
    import iso_bench.tasks  # noqa: F401 - registers the tasks


def _register_if_mteb_is_loaded() -> None:
    import sys

    if "mteb.get_tasks" in sys.modules:
        from iso_bench.mteb_plugin import register_tasks

        register_tasks()


_register_if_mteb_is_loaded()
