"""Cache namespaces of unrecorded precision: vectors filed under the name that means float32 but that a 16-bit
forward pass may have made, never served to a float32 request.

Before iso-bench recorded the precision of its own extraction, transformers 5 loaded a 16-bit checkpoint in its
own dtype, and the vectors went into the namespace without a dtype, the name that now means float32. Such a
namespace is recognised by its ``meta.json`` (an extraction record without ``precision``) of a 16-bit checkpoint,
or by 16-bit shards in its index (:func:`iso_bench.backbones.precision.unrecorded_half`): it is renamed
``<name>.<dtype>-unrecorded`` (``iso-bench cache`` lists it; delete it or prune it) and its vectors are encoded again.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sqlite3
from pathlib import Path

from iso_bench.backbones.precision import HALF, unrecorded_half
from iso_bench.vectors.index import INDEX_NAME

logger = logging.getLogger(__name__)


def half_shards(folder: Path) -> str | None:
    """The 16-bit storage the index of ``folder`` records for a shard, if any (None: float32 shards only, or no
    index that says)."""
    path = folder / INDEX_NAME
    if not path.is_file():
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT DISTINCT storage FROM shards").fetchall()
    except sqlite3.Error:  # an index from before 16-bit shards (no storage column), or none to read
        return None
    return next((r[0] for r in rows if r[0] in HALF), None)


def set_aside_unrecorded(folder: Path, storage: str | None, checkpoint: str | None) -> bool:
    """Before a float32 store (``storage`` None) opens the namespace ``folder``: rename it aside where its vectors
    may be 16-bit (see the module's docstring; ``checkpoint``: the checkpoint's own precision,
    :func:`iso_bench.backbones.precision.checkpoint_dtype`). False where it could not be renamed: then the store
    must not read it."""
    meta = folder / "meta.json"
    if storage is not None or not meta.is_file():
        return True
    try:
        record = json.loads(meta.read_text()).get("extraction")
    except (OSError, ValueError, AttributeError):  # a garbled meta.json: the shards' own checks decide
        record = None
    half = unrecorded_half(record, None, checkpoint) or half_shards(folder)
    if half is None:
        return True
    target, n = folder.with_name(f"{folder.name}.{half}-unrecorded"), 1
    while target.exists():
        target, n = folder.with_name(f"{folder.name}.{half}-unrecorded-{n}"), n + 1
    try:
        folder.rename(target)
    except FileNotFoundError:  # another process set it aside first
        return True
    except OSError as exc:
        logger.warning("the cached vectors in %s may be %s although filed as float32 (written before iso-bench "
                       "recorded precision), and cannot be set aside (%s): this run keeps its float32 vectors in "
                       "memory; delete that folder", folder, half, exc.strerror or exc)
        return False
    logger.warning("the cached vectors in %s may be %s although filed as float32 (written before iso-bench recorded "
                   "precision): set aside as %s, encoded again in float32", folder, half, target.name)
    return True
