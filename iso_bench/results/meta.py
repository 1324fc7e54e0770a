"""What a variant's ``model_meta.json`` holds as written: mteb's own record of its ``ModelMeta``, in one order
(:func:`meta_text`) and without the machine's paths (:func:`portable_meta`). Standard library only.

Example:
    >>> portable_meta({"loader_kwargs": {"base_model": "/home/me/m", "data_dir": "/data"}})
    {'loader_kwargs': {'base_model': 'local/m'}}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def meta_text(meta: Any) -> str:
    """The ``model_meta.json`` of ``meta``, in the form ``ResultCache.save_to_cache`` writes it, except that
    ``training_datasets`` (a set, which mteb lists in the process's hash order) is sorted: the same meta gives
    the same bytes in every run."""
    record = meta.to_dict()
    if isinstance(meta.training_datasets, (set, frozenset)):
        record["training_datasets"] = sorted(meta.training_datasets)
    return json.dumps(portable_meta(record), default=str, indent=4)


MACHINE_KWARGS = ("data_dir", "cache_dir")  # where this machine keeps data and caches: a route, never a setup


def portable_meta(record: dict[str, Any]) -> dict[str, Any]:
    """A ``model_meta.json`` record without the machine's paths: a local model folder (``loader_kwargs.base_model``,
    ``adapted_from``) named as results name it, ``local/<folder name>`` (its revision is the digest of its files),
    a fit corpus file by its name (``fit_corpus_path``; the setup holds its SHA-256), and the data and cache
    folders (:data:`MACHINE_KWARGS`) left out. Nothing of it is part of a result's digest.

    >>> portable_meta({"adapted_from": "/home/me/models/m", "loader_kwargs": {"base_model": "/home/me/models/m",
    ...                "data_dir": "/data", "fit_corpus_path": "/home/me/wiki.txt", "seed": 0}})
    {'adapted_from': 'local/m', 'loader_kwargs': {'base_model': 'local/m', 'fit_corpus_path': 'wiki.txt', 'seed': 0}}
    """
    def local(value: Any) -> Any:
        return f"local/{Path(value).name}" if isinstance(value, str) and Path(value).is_absolute() else value

    out = dict(record)
    if "adapted_from" in out:
        out["adapted_from"] = local(out["adapted_from"])
    kwargs = out.get("loader_kwargs")
    if isinstance(kwargs, dict):
        kwargs = {k: v for k, v in kwargs.items() if k not in MACHINE_KWARGS}
        if "base_model" in kwargs:
            kwargs["base_model"] = local(kwargs["base_model"])
        if isinstance(kwargs.get("fit_corpus_path"), str):
            kwargs["fit_corpus_path"] = Path(kwargs["fit_corpus_path"]).name
        out["loader_kwargs"] = kwargs
    return out
