"""What a model's own files say it is, read before it is loaded: the width of its sentence and token vectors
(``config.json``, the sentence-transformers Pooling and Dense modules' configs, a truncation), the precision its
weights load in and its pooling. :func:`iso_bench.backbones.loader.resolve` reads them once; mteb's metadata is
only the fallback where the files are not at hand. Importing this module loads neither torch nor mteb.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from iso_bench.backbones.base import read_model_json
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
