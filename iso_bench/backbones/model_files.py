"""What a model's own files say it is, read before it is loaded: the width of its sentence and token vectors
(``config.json``, the sentence-transformers Pooling and Dense modules' configs, a truncation), the precision its
weights load in and its pooling. :func:`iso_bench.backbones.loader.resolve` reads them once; mteb's metadata is
only the fallback where the files are not at hand. Importing this module loads neither torch nor mteb.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from iso_bench.backbones.base import BackboneError, read_model_json
from iso_bench.backbones.precision import FLOAT32, config_dtype

HIDDEN_KEYS = ("hidden_size", "d_model", "n_embd", "dim", "hidden_dim")
"""The ``config.json`` keys that hold a transformer's hidden size (``hidden_dim``: a model2vec model's width)."""
POOLING_MODES = ("cls", "mean", "max", "mean_sqrt_len", "weightedmean", "lasttoken")


@dataclass(frozen=True)
class FilesSay:
    """``hidden``: the hidden size (the token vectors' width); ``width``: the sentence vectors' width after the
    pipeline's Pooling, Dense and truncation (the hidden size where the model has no pipeline); ``pooling``: the
    Pooling module's mode; ``dtype``: the dtype ``config.json`` records, as it records it (None: float32 or not
    said; float64 stays float64, where :func:`iso_bench.backbones.precision.checkpoint_dtype`, the precision
    iso-bench runs the checkpoint in, says float32). None: not read."""

    hidden: int | None = None
    width: int | None = None
    pooling: str | None = None
    dtype: str | None = None


def hidden_size(config: dict[str, Any] | None) -> int | None:
    """The hidden size ``config`` (a ``config.json``) holds, also under a ``text_config``."""
    for cfg in (config or {}, (config or {}).get("text_config") or {}):
        for key in HIDDEN_KEYS:
            if isinstance(cfg.get(key), int):
                return cfg[key]
    return None


def read_files(model: str, revision: str | None, modules: list[dict[str, Any]] | None,
               truncate: int | None = None) -> FilesSay:
    """What the files of ``model`` at ``revision`` say (:class:`FilesSay`); ``modules`` is its ``modules.json``
    (None: no sentence-transformers pipeline); ``truncate`` a truncation its loader applies (mteb's ``embed_dim``
    of an instruction wrapper, ``truncate_dim``)."""
    config = read_model_json(model, "config.json", revision)
    config = config if isinstance(config, dict) else None
    hidden = hidden_size(config)
    width, pooling = hidden, None
    for module in modules or ():
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        path = str(module.get("path", "")).strip("/")
        if kind not in ("Pooling", "Dense", "Transformer", "StaticEmbedding"):
            continue
        cfg = read_model_json(model, f"{path}/config.json".lstrip("/"), revision) if path else config
        cfg = cfg if isinstance(cfg, dict) else {}
        if kind == "Transformer" and path:  # a transformer in a subfolder: its own config.json
            hidden = hidden_size(cfg) or hidden
            width = hidden
        elif kind == "StaticEmbedding":
            hidden = width = cfg.get("embedding_dim") or cfg.get("hidden_dim") or hidden
        elif kind == "Pooling":
            dim = cfg.get("embedding_dimension", cfg.get("word_embedding_dimension"))
            modes = ([cfg["pooling_mode"]] if isinstance(cfg.get("pooling_mode"), str) else
                     [m for m in POOLING_MODES if any(cfg.get(f"pooling_mode_{m}{end}") for end in ("_tokens", "_token",
                                                                                                  ""))])
            pooling = "+".join(modes) or None
            if isinstance(dim, int):
                width = dim * max(1, len(modes))
        elif kind == "Dense" and isinstance(cfg.get("out_features"), int):
            width = cfg["out_features"]
    st_config = read_model_json(model, "config_sentence_transformers.json", revision) if modules else None
    for cut in ((st_config or {}).get("truncate_dim") if isinstance(st_config, dict) else None, truncate):
        if isinstance(cut, int) and width is not None:
            width = min(width, cut)
    dtype = config_dtype(config)
    return FilesSay(hidden, width, pooling, None if dtype in (None, FLOAT32) else dtype)


COMMIT = re.compile(r"[0-9a-f]{40}")


def revision_commit(model: str, revision: str | None) -> str | None:
    """The commit that ``revision`` of the hub model ``model`` names, resolved before anything is decided or
    recorded: a commit is itself; a branch or tag (``main``) is looked up in the Hugging Face cache's ``refs/``,
    a short commit among its snapshots, else (online) asked of the hub. None for None and for a local folder (its
    files are its revision). A revision that cannot be resolved is a :class:`BackboneError` in one line."""
    if revision is None or Path(model).is_dir() or COMMIT.fullmatch(revision):
        return None if revision is None or Path(model).is_dir() else revision
    from huggingface_hub import constants  # lazily: huggingface_hub is imported with transformers

    root = Path(constants.HF_HUB_CACHE) / f"models--{model.replace('/', '--')}"
    ref = root / "refs" / revision
    if ref.is_file() and COMMIT.fullmatch(ref.read_text().strip()):
        return ref.read_text().strip()
    if re.fullmatch(r"[0-9a-f]{7,39}", revision):
        found = [p.name for p in (root / "snapshots").glob(f"{revision}*")] if (root / "snapshots").is_dir() else []
        if len(found) == 1:
            return found[0]
    if os.environ.get("HF_HUB_OFFLINE") != "1" and not constants.HF_HUB_OFFLINE:
        try:
            from huggingface_hub import HfApi  # lazily: a look-up on the hub

            return HfApi().model_info(model, revision=revision).sha
        except Exception as exc:  # noqa: BLE001 - whatever the hub answers, said in one line
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise BackboneError(f"--revision {revision}: cannot resolve it to a commit of {model!r} ({reason}); "
                                "check the name, or give the commit") from None
    raise BackboneError(f"--revision {revision}: cannot resolve it to a commit of {model!r} offline (the Hugging "
                        f"Face cache at {constants.HF_HUB_CACHE} has no refs/{revision} of it); give the commit, or "
                        "unset HF_HUB_OFFLINE")
