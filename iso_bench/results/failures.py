"""A variant's evaluation that failed (a fit that could not be made: whiten on a 3-line corpus), recorded where its
result would be: ``<Task>.failed`` beside the ``<Task>.json`` it lacks, so that a leaderboard built later shows
the cell as ``–`` with the reason instead of leaving the row out without a word. Not a ``.json`` file: mteb's
``ResultCache`` and ``iso-bench submission`` read result JSON only, and never take it for a result. A later run
that writes the result removes it.

Example:
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "STS12.json"
    >>> record_failure(path, "org/m+whiten", "STS12", "too few fit vectors")
    >>> read_failure(path.with_suffix(SUFFIX))["reason"]
    'too few fit vectors'
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from iso_bench.files import atomic_write_json

SUFFIX = ".failed"
# a path of the machine in an error's text is written as ./<its name> (iso_bench.files.local_name): no written
# file holds the machine's paths
MAX_REASON = 600  # characters of the error kept: its first line or lines, never a whole traceback


def record_failure(result_path: Path, model: str, task: str, reason: str, setup: dict[str, Any] | None = None,
                   benchmark: dict[str, Any] | None = None) -> None:
    """Record that ``model`` on ``task`` failed with ``reason`` beside ``result_path`` (its result's file), with
    its ``setup`` (experiment kwargs: the folder holds no ``model_meta.json`` until a result is written) and the
    ``benchmark`` its result would have recorded (:func:`iso_bench.results.benchmark.result_record`), so that the
    board counts the failure under the benchmark definition of the run that made it."""
    result_path = Path(result_path)
    result_path.parent.mkdir(parents=True, exist_ok=True)
    text = re.sub(r"(?<![\w.])(?:/[^\s/:()]+)+/([^\s/:()]+)", r"./\1", " ".join(str(reason).split()))[:MAX_REASON]
    atomic_write_json(result_path.with_suffix(SUFFIX), {"model": model, "task": task, "reason": text,
                                                        "setup": json.loads(json.dumps(setup or {}, default=str)),
                                                        **({"benchmark": benchmark} if benchmark else {})})


def clear_failure(result_path: Path) -> None:
    """Remove the failure recorded beside ``result_path`` (its result is now written)."""
    Path(result_path).with_suffix(SUFFIX).unlink(missing_ok=True)


def read_failure(path: Path) -> dict[str, Any] | None:
    """The failure recorded in ``path`` (``model``, ``task``, ``reason``, ``setup`` and, since it is recorded,
    ``benchmark``); None where it cannot be read."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    ok = isinstance(data, dict) and all(isinstance(data.get(k), str) and data[k] for k in ("task", "reason"))
    return data if ok else None
