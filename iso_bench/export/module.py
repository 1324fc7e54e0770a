"""The sentence-transformers module of an exported variant that no ``Dense`` module can express: flow,
cluster-pca and every token-level method, applied by iso-bench's own code to what the pipeline before it gives.

:class:`PostProcessing` holds a fitted method (rebuilt from its spec and learned state) and, in ``forward``:

- ``level="sentence"``: transforms the pipeline's ``sentence_embedding`` (flow), as the variant transforms the
  raw sentence vectors;
- ``level="token"``: takes the pipeline's ``token_embeddings``, keeps the text's own tokens (not the special
  tokens the tokenizer adds, ``skip_start`` at the start and ``skip_end`` at the end, nor a prompt's tokens),
  transforms them, averages them per text (:meth:`~iso_bench.methods.base.Method.transform_means`) and
  normalises the mean where the base pipeline normalises (``normalize``): the variant's sentence vector. A
  static (model2vec) pipeline has no token embeddings: the module reads its tokens' rows of the static embedding.
  This is how iso-bench exported a token-level variant before its variants pooled as the model pools; such folders
  still load and give what they gave.
- ``level="rows"``: stands just after the pipeline's first module, before its pooling: transforms every token
  vector the model attends to (``token_embeddings`` under ``attention_mask``; a static pipeline's rows of every
  token id, then their mean, as its EmbeddingBag takes it) in the model's coordinates, so that the pipeline's own
  pooling, Dense and Normalize follow: what a token-level variant is (:mod:`iso_bench.backbones.pool_replay`).

Its folder holds ``config.json`` (the keys of :attr:`PostProcessing.config_keys`) and the fitted state as
``state.npz`` (the arrays, each named by its place: ``mean_``, ``blocks_.0.1.w``) with ``state.json`` (how they
fit together); no pickle. sentence-transformers finds the class by its import path in ``modules.json``:
``SentenceTransformer(folder, trust_remote_code=True)`` loads it where iso-bench is installed
(sentence-transformers 6 asks for ``trust_remote_code`` before it imports any module class outside its own package).

Example:
    >>> from sentence_transformers import SentenceTransformer                        # doctest: +SKIP
    >>> SentenceTransformer("minilm-cluster-pca", trust_remote_code=True).encode(["a cat"]).shape  # doctest: +SKIP
    (1, 384)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from sentence_transformers.base.modules import Module

from iso_bench.files import MANIFEST, verify_manifest
from iso_bench.methods import Method, make_method
from iso_bench.vectors.fit_cache import pack_state, unpack_state

STATE = "state"
"""The stem of a module's state files: ``state.npz`` and ``state.json``."""


def write_state(method: Method, stem: Path, extra: dict[str, np.ndarray] | None = None) -> dict[str, Any]:
    """Write the learned state of ``method`` as ``<stem>.npz`` (its arrays by name, and ``extra``) and return the
    tree that says how they fit together (:func:`iso_bench.vectors.fit_cache.pack_state`)."""
    tree, arrays = pack_state(method, named=True)
    every = {**arrays, **(extra or {})}
    np.savez(stem.with_suffix(".npz"), **{k: every[k] for k in sorted(every)})  # entries in one order, always
    return tree


def read_state(spec: str, npz: str | Path, tree: dict[str, Any]) -> Method:
    """The method of ``spec`` with the learned state of ``npz`` and ``tree`` (:func:`write_state`) set on it."""
    with np.load(npz, allow_pickle=False) as z:
        arrays = {name: z[name] for name in z.files}
    return unpack_state(make_method(spec)[0], tree, arrays)


class PostProcessing(Module):
    """A fitted iso-bench method as the last module of a sentence-transformers pipeline (see the module docstring).

    Args:
        spec: the method spec (``flow``, ``cluster-pca-27-12``, ``whiten-level=token``).
        level: ``"sentence"``, ``"rows"`` (before the pooling) or ``"token"`` (older exports): what it transforms.
        normalize: token level: scale each pooled vector to unit length (the base pipeline ends with Normalize).
        skip_start, skip_end: token level: the special tokens the tokenizer adds before and after a text.
        output_dim: the dimension of the vectors it gives.
        static: token level: the pipeline is a static embedding (its tokens' rows are the token vectors).
        method: the fitted method (``load`` rebuilds it from the folder).
    """

    config_keys: list[str] = ["spec", "level", "normalize", "skip_start", "skip_end", "output_dim", "static"]

    def __init__(self, spec: str, level: str = "sentence", normalize: bool = False, skip_start: int = 0,
                 skip_end: int = 0, output_dim: int = 0, static: bool = False, method: Method | None = None) -> None:
        super().__init__()
        self.spec, self.level, self.normalize, self.static = spec, level, bool(normalize), bool(static)
        self.skip_start, self.skip_end, self.output_dim = int(skip_start), int(skip_end), int(output_dim)
        self.method = method
        self._rows: Any = None  # a static pipeline's embedding matrix (on_model_ready)

    def on_model_ready(self, model: Any) -> None:
        """A static pipeline: keep its embedding matrix, whose rows are its token vectors."""
        first = model[0] if len(model) else None
        if type(first).__name__ == "StaticEmbedding":
            self._rows = first.embedding.weight

    def forward(self, features: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
        if self.method is None:
            raise RuntimeError(f"PostProcessing({self.spec}) has no fitted method; load it from its folder")
        if self.level == "sentence":
            X = features["sentence_embedding"]
            Z = self.method.transform(X.detach().float().cpu().numpy())
            features["sentence_embedding"] = torch.from_numpy(Z.astype(np.float32)).to(X.device)
            return features
        if self.level == "rows":
            return self.rows(features)
        device = features["input_ids"].device
        features["sentence_embedding"] = torch.from_numpy(self.pool(self.token_vectors(features))).to(device)
        return features

    def rows(self, features: dict[str, Any]) -> dict[str, Any]:
        """``level="rows"``: the token vectors the pooling reads, transformed in the model's coordinates."""
        transform = getattr(self.method, "model_coordinates", self.method.transform)
        if "token_embeddings" not in features:  # a static pipeline: the mean of its ids' transformed rows
            if not self.static or self._rows is None:
                raise ValueError(f"PostProcessing({self.spec}): the pipeline gives no token_embeddings")
            ids, starts = features["input_ids"], features["offsets"].tolist()
            Z = transform(self._rows.detach()[ids].float().cpu().numpy())
            means = [Z[a:b].mean(axis=0) for a, b in zip(starts, [*starts[1:], len(ids)], strict=True)]
            out = features["sentence_embedding"]
            features["sentence_embedding"] = torch.from_numpy(np.stack(means).astype(np.float32)).to(out.device,
                                                                                                       out.dtype)
            return features
        T = features["token_embeddings"]
        mask = features.get("attention_mask")
        keep = torch.ones(T.shape[:2], dtype=torch.bool, device=T.device) if mask is None else mask.bool()
        Z = transform(T[keep].detach().float().cpu().numpy())
        T = T.clone()
        T[keep] = torch.from_numpy(Z.astype(np.float32)).to(T.device, T.dtype)
        features["token_embeddings"] = T
        return features

    def pool(self, tokens: list[np.ndarray]) -> np.ndarray:
        """The variant's sentence vectors from each text's token vectors (float32, special tokens left out):
        transformed, averaged per text and (``normalize``) scaled to unit length, as float32."""
        lengths = [len(t) for t in tokens]
        if min(lengths, default=1) == 0:
            empty = [i for i, n in enumerate(lengths) if n == 0][:3]
            raise ValueError(f"texts {empty} of the batch have no token of their own: the token-level variant "
                             f"{self.spec} cannot pool them")
        pooled = self.method.transform_means(np.concatenate(tokens, axis=0), np.cumsum([0, *lengths[:-1]]))
        if self.normalize:
            pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        return pooled.astype(np.float32)

    def token_vectors(self, features: dict[str, Any]) -> list[np.ndarray]:
        """Each text's own token vectors, as iso-bench's raw-vector store reads them: past padding, the
        tokenizer's special tokens and a prompt's tokens (``prompt_length``); a static pipeline's embedding rows."""
        if "token_embeddings" not in features:
            if not self.static or self._rows is None:
                raise ValueError(f"PostProcessing({self.spec}): the pipeline gives no token_embeddings")
            ids, offsets = features["input_ids"], features["offsets"].tolist()
            rows = self._rows.detach()[ids].float().cpu().numpy()
            bounds = [*offsets, len(ids)]
            return [rows[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
        hidden = features["token_embeddings"].detach().float().cpu().numpy()
        mask = features.get("attention_mask")
        mask = np.ones(hidden.shape[:2], bool) if mask is None else mask.detach().cpu().numpy().astype(bool)
        prompt = features.get("prompt_length")
        prompt = int(prompt[0] if hasattr(prompt, "__len__") else prompt) if prompt is not None else 0
        start = max(self.skip_start, prompt)
        out = []
        for row, keep in zip(hidden, mask, strict=True):
            positions = np.flatnonzero(keep)
            out.append(row[positions[start:len(positions) - self.skip_end]])
        return out

    def get_embedding_dimension(self) -> int:
        return self.output_dim

    def save(self, output_path: str, *args: Any, safe_serialization: bool = True, **kwargs: Any) -> None:
        """``config.json``, ``state.npz`` and ``state.json`` in ``output_path``."""
        self.save_config(output_path)
        tree = write_state(self.method, Path(output_path) / STATE)
        Path(output_path, f"{STATE}.json").write_text(json.dumps(tree, indent=1, sort_keys=True), encoding="utf-8")

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token: bool | str | None = None,
             cache_folder: str | None = None, revision: str | None = None, local_files_only: bool = False,
             **kwargs: Any) -> PostProcessing:
        """The module saved in ``subfolder`` of a local folder or hub repository, with its fitted method."""
        root = Path(model_name_or_path)
        if root.is_dir() and (root / MANIFEST).exists():  # an exported folder: its files as the export wrote them
            verify_manifest(root)
        where = {"subfolder": subfolder, "token": token, "cache_folder": cache_folder, "revision": revision,
                 "local_files_only": local_files_only}
        config = cls.load_config(model_name_or_path, **where)
        npz = cls.load_file_path(model_name_or_path, f"{STATE}.npz", **where)
        tree = cls.load_file_path(model_name_or_path, f"{STATE}.json", **where)
        if npz is None or tree is None:
            raise FileNotFoundError(f"{model_name_or_path}/{subfolder}: {STATE}.npz or {STATE}.json is missing")
        method = read_state(config["spec"], npz, json.loads(Path(tree).read_text(encoding="utf-8")))
        return cls(**{k: v for k, v in config.items() if k in cls.config_keys}, method=method)
