"""Register iso-bench's variants, tasks and benchmark with mteb once mteb's registries are imported, without
importing mteb (3 s) when ``iso_bench`` is imported for something that does not need it."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

MODELS = "mteb.models.model_implementations"
TASKS = "mteb.get_tasks"
RESULTS = "mteb.cache"
BENCHMARKS = "mteb.benchmarks.benchmarks"


class _AfterImport(importlib.abc.MetaPathFinder):
    """A finder that wraps one module's loader so that ``callback`` runs right after it executes."""

    def __init__(self, name: str, callback: Callable[[], None]) -> None:
        self.name = name
        self.callback = callback

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # find the real spec with the other finders, once
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        loader, callback = spec.loader, self.callback

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec: Any) -> Any:
                return loader.create_module(spec)

            def exec_module(self, module: ModuleType) -> None:
                loader.exec_module(module)
                callback()

        spec.loader = _Loader()
        return spec


def when_imported(name: str, callback: Callable[[], None]) -> None:
    """Run ``callback`` now if module ``name`` is imported already, else right after its import."""
    if name in sys.modules:
        callback()
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, callback))


def _register_models() -> None:
    from iso_bench.mteb_plugin import register_known  # lazily: registering waits for mteb's import

    register_known()


def _register_tasks() -> None:
    from iso_bench.mteb_plugin import register_tasks  # lazily: registering waits for mteb's import

    register_tasks()


def _install_result_hook() -> None:
    from iso_bench.mteb_plugin import install_result_hook  # lazily: registering waits for mteb's import

    install_result_hook()
    from iso_bench.results.submission import install_submitted_reader  # lazily: it wraps mteb's ResultCache

    install_submitted_reader()


def _register_benchmark() -> None:
    from iso_bench.mteb_plugin import register_benchmark  # lazily: registering waits for mteb's import

    register_benchmark()


def install() -> None:
    when_imported(MODELS, _register_models)
    when_imported(TASKS, _register_tasks)
    when_imported(RESULTS, _install_result_hook)
    when_imported(BENCHMARKS, _register_benchmark)
