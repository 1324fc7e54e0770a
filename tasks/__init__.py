"""iso-bench's task definitions, one small file per task; installed as ``iso_bench.tasks``.

Each file defines a subclass of a task kind from :mod:`iso_bench.kinds` with its data source and
metadata card; defining it registers it. Importing this package imports every file in it.
"""

from __future__ import annotations

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
