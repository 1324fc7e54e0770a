"""Storage stages: a method's vectors stored in fewer bytes, ``-precision=int8`` and ``-precision=binary`` after any
method (``whiten-256-precision=binary``, ``raw-precision=int8``, ``zipfian-whiten-precision=int8``), named after
sentence-transformers' ``encode(precision=...)``, whose quantization
(:func:`sentence_transformers.util.quantization.quantize_embeddings`) computes the codes.

- ``int8``: each dimension's range, the minimum and maximum of the method's transformed fit vectors (what
  sentence-transformers calibrates from ``calibration_embeddings``), cut into 256 buckets. The range is learned in
  the method's own fit, on the same fit corpus and in the same pass (the fit vectors transformed once more, no
  second encode): ``raw-precision=int8`` is therefore a fitted variant. The codes are scored as they are stored,
  with the model's similarity function, as sentence-transformers' evaluators score its int8 output. A stage that
  calibrates needs all of its fit vectors at once, so the method does not stream (a fit corpus over the fit budget
  is sampled, and the sample recorded, as for any method that does not stream). A token-level variant stores its
  pooled sentence vector: its ranges are those of the fit corpus's pooled vectors (:meth:`Int8.calibrate_pooled`,
  called by :mod:`iso_bench.fitting` in the same fit), and its token and span vectors keep the token vectors' ranges.
- ``binary``: the sign of each coordinate (``> 0``), packed 8 to a byte, and scored as the +1/-1 vector of its
  bits: the cosine of two such d-d vectors is ``1 - 2 * hamming / d``, so every evaluator ranks as a Hamming
  search does, and ties (equal distances) fall the same way on every run. Nothing to calibrate: ``raw`` stays
  unfitted.

A staged method is its method's class with the stage before it (:func:`staged`): it fits and transforms as the
method does, then quantizes; its spec and parameters are the method's plus ``precision``; its learned state is the
method's plus, for int8, ``ranges_`` (2, d) and ``ranges_sha256_`` (what a result records of the calibration).

Example:
    >>> from iso_bench.methods import make_method
    >>> X = np.array([[1.0, -2.0], [3.0, 2.0], [2.0, 0.0]])
    >>> m = make_method("center-precision=binary")[0].fit(X)
    >>> m.spec, m.transform(X).tolist()
    ('center-precision=binary', [[-1.0, -1.0], [1.0, 1.0], [-1.0, -1.0]])
    >>> fit = np.array([[0.0, 0.0], [255.0, 510.0]])  # ranges [0, 255] and [0, 510]: buckets of 1 and 2
    >>> make_method("raw-precision=int8")[0].fit(fit).transform(np.array([[100.0, 100.0], [300.0, -1.0]])).tolist()
    [[-28.0, -78.0], [127.0, -128.0]]
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Iterable
from typing import Any, ClassVar

import numpy as np

from iso_bench.methods.base import METHODS, STAGES, Method, NotFittedError

FLOAT32_BYTES = 4


def quantize(Z: np.ndarray, precision: str, ranges: np.ndarray | None = None) -> np.ndarray:
    """sentence-transformers' codes of ``Z`` (``int8`` with ``ranges``, or packed ``binary``), imported when used."""
    from sentence_transformers.util.quantization import quantize_embeddings  # lazily: it imports torch

    return quantize_embeddings(Z, precision=precision, ranges=ranges)


class Stage:
    """What a stage adds to a method class (it comes before the class in the order of bases)."""

    precision: ClassVar[str] = ""
    calibrates: ClassVar[bool] = False  # learns from the transformed fit vectors (int8's ranges)
    method_class: ClassVar[type[Method]]

    def __init__(self, *, precision: str | None = None, **params: Any) -> None:
        super().__init__(**params)  # type: ignore[call-arg]
        self.precision = type(self).precision
        if precision not in (None, self.precision):
            self._refuse(f"precision={precision} given to its {self.precision} stage")  # type: ignore[attr-defined]

    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        return {**cls.method_class.param_defaults(), "precision": None}

    def __reduce__(self) -> tuple[Any, ...]:  # built by staged(), not by its name: pickle it through staged()
        return _blank, (self.method_class, self.precision), dict(vars(self))

    def check(self, dim: int | None = None) -> None:
        """The method's checks, then: its vectors must keep at least one dimension to store."""
        super().check(dim)  # type: ignore[misc]
        if dim is not None and self.output_dim(dim) < 1:  # type: ignore[attr-defined]
            self._refuse(f"a {self.precision} stage needs vectors of at least 1 dimension, "  # type: ignore[attr-defined]
                         f"and it gets {self.output_dim(dim)}-d ones")  # type: ignore[attr-defined]

    def unstaged_transform(self, X: np.ndarray) -> np.ndarray:
        """The method's own transform, without the stage (what a token-level variant applies to the pooled rows)."""
        return self.method_class.transform(self, X)  # type: ignore[arg-type]

    def stored(self, Z: np.ndarray) -> np.ndarray:  # pragma: no cover - each stage defines it
        """The stage's codes of the method's vectors ``Z``, as float64."""
        raise NotImplementedError

    def affine(self) -> None:
        """None: quantized vectors are no affine map of the input (export writes the stage on its own)."""
        return None

    def stored_bytes(self, dim: int) -> int:  # pragma: no cover - each stage defines it
        raise NotImplementedError


class Int8(Stage):
    precision = "int8"
    calibrates = True

    def streaming(self) -> bool:
        """The method's own: where its fit streams (a fit corpus beyond the budget), the stage's ranges are a
        second pass over the same batches (:meth:`calibrate_batches`), so that the int8 variant's vectors are
        those of the method's variant, fitted the same way, and no fit holds the corpus whole."""
        return self.method_class.streaming(self)  # type: ignore[arg-type]

    def fit(self, X: np.ndarray) -> Method:
        """The method's fit, then each dimension's range over its transform of the same fit vectors."""
        super().fit(X)  # type: ignore[misc]
        Z = super().transform(X)  # type: ignore[misc]
        self._set_ranges(Z.min(axis=0), Z.max(axis=0))
        return self  # type: ignore[return-value]

    def calibrate_batches(self, batches: Iterable[np.ndarray]) -> None:
        """The ranges of a streamed fit (:meth:`partial_fit`, then :meth:`finalize`): each dimension's minimum and
        maximum over the method's transform of the fit vectors, a batch at a time, kept as they come."""
        found = extremes(self.unstaged_transform(X) for X in batches)
        if found is None:
            raise NotFittedError(f"method {self.spec!r}: no fit vectors to calibrate its int8 ranges on")  # type: ignore
        self._set_ranges(*found)

    def _set_ranges(self, low: np.ndarray, high: np.ndarray) -> None:
        # sentence-transformers' calibration (min and max of the calibration embeddings), in its float32
        self.ranges_ = np.vstack((low, high)).astype(np.float32)
        self.ranges_sha256_ = hashlib.sha256(np.ascontiguousarray(self.ranges_).tobytes()).hexdigest()

    def calibrate_pooled(self, low: np.ndarray, high: np.ndarray) -> None:
        """A token-level variant's calibration, after :meth:`fit` on token vectors: ``ranges_`` become each
        dimension's minimum ``low`` and maximum ``high`` over the fit corpus's pooled sentence vectors (its rows
        transformed, then the model's pooling and head: what :meth:`stored` quantizes); the ranges of the
        transformed token vectors that :meth:`fit` learned stay as ``token_ranges_``, what a span or token vector
        (a word task, the isotropy task) is stored with, as for the sentence-level spec on those tasks."""
        if not hasattr(self, "token_ranges_"):  # calibrated once: the token vectors' ranges are fit's
            self.token_ranges_, self.token_ranges_sha256_ = self.ranges_, self.ranges_sha256_
        self._set_ranges(low, high)

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The method's vectors as int8 codes (-128 to 127; outside the calibrated range: clipped), as float64;
        token or span vectors of a token-level fit with the ranges of its token vectors (``token_ranges_``)."""
        Z = super().transform(X)  # type: ignore[misc]
        if not hasattr(self, "ranges_"):  # the method's state without the stage's (a fit not made by this stage)
            raise NotFittedError(f"method {self.spec!r} has no int8 ranges: fit it on a fit corpus")  # type: ignore
        return quantize(Z, "int8", getattr(self, "token_ranges_", self.ranges_)).astype(np.float64)

    def stored(self, Z: np.ndarray) -> np.ndarray:
        """A token-level variant's pooled sentence vectors ``Z`` as int8 codes, with the ranges calibrated on the
        fit corpus's pooled vectors (:meth:`calibrate_pooled`), as float64."""
        if not hasattr(self, "token_ranges_"):
            raise NotFittedError(f"method {self.spec!r} has no int8 ranges of pooled vectors: "  # type: ignore
                                 "fit it at token level on a fit corpus")
        return quantize(np.asarray(Z, np.float64), "int8", self.ranges_).astype(np.float64)

    def stored_bytes(self, dim: int) -> int:
        return self.output_dim(dim)  # type: ignore[attr-defined]


def extremes(batches: Iterable[np.ndarray]) -> tuple[np.ndarray, np.ndarray] | None:
    """Each dimension's minimum and maximum over the rows of ``batches``, kept as they come (no matrix of them
    all); ``None`` where there are no batches. What an int8 stage's ranges are, however its vectors arrive."""
    low = high = None
    for Z in batches:
        low = Z.min(axis=0) if low is None else np.minimum(low, Z.min(axis=0))
        high = Z.max(axis=0) if high is None else np.maximum(high, Z.max(axis=0))
    return None if low is None else (low, high)


class Binary(Stage):
    precision = "binary"

    def transform(self, X: np.ndarray) -> np.ndarray:
        """The method's vectors as +1/-1 (the sign bit: ``> 0``), as float64."""
        return self.stored(super().transform(X))  # type: ignore[misc]

    def stored(self, Z: np.ndarray) -> np.ndarray:
        """``Z`` as +1/-1 (the sign bit: ``> 0``), as float64."""
        packed = (quantize(Z, "binary").astype(np.int16) + 128).astype(np.uint8)  # undo its -128 shift
        return np.unpackbits(packed, axis=1, count=Z.shape[1]).astype(np.float64) * 2.0 - 1.0

    def stored_bytes(self, dim: int) -> int:
        return -(-self.output_dim(dim) // 8)  # type: ignore[attr-defined]


@functools.cache
def staged(cls: type[Method], stage: type[Stage]) -> type[Method]:
    """The class of ``cls`` with ``stage`` after it: fitted where the method is or the stage calibrates."""
    doc = f"{cls.__name__} with its vectors stored as {stage.precision} (see :mod:`{__name__}`)."
    return type(f"{cls.__name__}{stage.__name__}", (stage, cls),
                {"__module__": __name__, "__doc__": doc, "method_class": cls, "fitted": cls.fitted or stage.calibrates})


def _blank(cls: type[Method], precision: str) -> Method:
    """An empty staged method (pickle sets its state)."""
    made = STAGES.get(precision)(cls)
    return made.__new__(made)


def stage_pooled(method: Method, Z: np.ndarray) -> np.ndarray:
    """A token-level variant's sentence vectors ``Z`` (its rows transformed, then the model's pooling and head) as
    its stage stores them (float32), or ``Z`` itself where the method has no stage: the stage applies to the
    sentence vector, never to the rows the pooling reads.

    >>> stage_pooled(make_binary(), np.array([[0.5, -2.0]], np.float32)).tolist()
    [[1.0, -1.0]]
    """
    return method.stored(Z).astype(np.float32) if isinstance(method, Stage) else Z


def stored_bytes(method: Method, dim: int, raw_bits: int = 32) -> int:
    """Bytes of one vector as stored for ``dim``-d input: a stage's (int8: d, binary: d / 8 rounded up), else float32
    (4 d), or 2 d where the model's raw vectors are kept in 16 bits (``raw_bits``) and the method keeps their values
    (``raw``, ``truncate``: ``keeps_values``).

    >>> from iso_bench.methods import make_method
    >>> [stored_bytes(make_method(s)[0], 384) for s in ("whiten", "whiten-precision=int8", "pca-128-precision=binary")]
    [1536, 384, 16]
    """
    if isinstance(method, Stage):
        return method.stored_bytes(dim)
    width = 2 if raw_bits == 16 and getattr(method, "keeps_values", False) else FLOAT32_BYTES
    return width * method.output_dim(dim)


def storage_record(method: Method, dim: int | None, raw_storage: str | None = None) -> dict[str, Any]:
    """What a result records of how its vectors are stored: ``precision`` (``float32``; ``float16``/``bfloat16``
    where ``raw_storage``, the precision the model's raw vectors are kept in, survives: ``raw``, ``truncate``;
    ``int8``, ``binary``), the stored vector's ``dim`` and ``bytes``, and an int8 stage's ``calibration``
    (``ranges_sha256``: the SHA-256 of its float32 ranges; the corpus it was calibrated on is the fit's).

    >>> from iso_bench.methods import make_method
    >>> storage_record(make_method("truncate-128")[0], 384, "bfloat16")
    {'precision': 'bfloat16', 'dim': 128, 'bytes': 256}
    """
    kept = raw_storage in ("float16", "bfloat16") and getattr(method, "keeps_values", False)
    precision = getattr(method, "precision", None) or (raw_storage if kept else "float32")
    if dim is None:
        return {"precision": precision}
    out: dict[str, Any] = {"precision": precision, "dim": method.output_dim(dim),
                           "bytes": stored_bytes(method, dim, 16 if kept else 32)}
    if getattr(method, "ranges_sha256_", None):
        out["calibration"] = {"ranges_sha256": method.ranges_sha256_}  # type: ignore[attr-defined]
    return out


def storage_of(method: Method, variant: Any) -> dict[str, Any]:
    """:func:`storage_record` of a variant's fitted ``method``; ``variant`` has ``store`` (the raw-vector store: its
    backbone's sentence width, the precision it keeps raw vectors in) and ``level``. At token level the stored
    vector is the model's own pooled one (the method stands before its pooling and head), so it has the model's
    sentence width whatever the method's width on token rows, and it is float32 unless a stage follows."""
    store = getattr(variant, "store", None)
    dim = getattr(getattr(store, "backbone", None), "dim", None)
    if getattr(variant, "level", "sentence") != "token":
        return storage_record(method, dim, getattr(store, "storage", None))
    precision = getattr(method, "precision", None) or "float32"
    if dim is None:
        return {"precision": precision}
    out = {"precision": precision, "dim": dim, "bytes": {"binary": -(-dim // 8), "int8": dim}.get(precision, 4 * dim)}
    if getattr(method, "ranges_sha256_", None):  # int8: the ranges of the fit corpus's pooled vectors
        out["calibration"] = {"ranges_sha256": method.ranges_sha256_}  # type: ignore[attr-defined]
    return out


def storage_how(method: Method, dim: int) -> dict[str, Any]:
    """What an exported variant records of its storage stage ({} for none): the precision, the bytes a vector takes,
    the calibration (int8: ``ranges_`` in the exported state, and their SHA-256) and how to store the folder's
    vectors with sentence-transformers as the variant scored them."""
    precision = getattr(method, "precision", None)
    if precision is None:
        return {}
    out: dict[str, Any] = {"precision": precision, "stored_bytes": stored_bytes(method, dim)}
    if precision == "int8":
        out["calibration"] = {"ranges": "ranges_ (2, d) in the exported state", "ranges_sha256": method.ranges_sha256_}
        out["store_with"] = ("the folder encodes int8 codes as float32 (-128..127): vectors.astype('int8'); the same "
                             "codes: quantize_embeddings(method vectors, precision='int8', ranges=ranges_)")
    else:
        out["store_with"] = ("the folder encodes +1/-1 as float32: quantize_embeddings(vectors, precision='ubinary') "
                             "packs them to d/8 bytes; score with the Hamming distance (cosine = 1 - 2 H / d)")
    return out


def stored_scores(method: Method, meta: Any, own: Any, cosine: Any, a: Any, b: Any, *, pairwise: bool = False) -> Any:
    """How a variant scores two sets of its vectors (mteb's ``similarity``, or ``similarity_pairwise`` where
    ``pairwise``): the model's own similarity (``own``, where ``meta`` names one), else ``cosine``; but a binary
    stage's +1/-1 vectors from their Hamming distance H, exactly (cosine ``1 - 2 H / d``, dot ``d - 2 H``): as
    float32 arithmetic would compute the cosine, equal distances could score apart by a rounding, and a Hamming
    search ties them. Any other similarity function of the model is its own.

    >>> a = np.array([[1.0, 1.0, -1.0, 1.0]]); b = np.array([[1.0, -1.0, -1.0, -1.0], [1.0, 1.0, 1.0, 1.0]])
    >>> stored_scores(make_binary(), None, None, None, a, b).tolist()
    [[0.0, 0.5]]
    """
    name = getattr(meta, "similarity_fn_name", None)
    name = getattr(name, "value", name)  # mteb's ScoringFunction, or its value
    if getattr(method, "precision", None) == "binary" and name in (None, "cosine", "dot"):
        import torch  # lazily: what mteb's scores are

        A, B = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
        dots = (A * B).sum(axis=1) if pairwise else A @ B.T  # integers d - 2 H, exact in float64
        return torch.from_numpy((dots if name == "dot" else dots / A.shape[1]).astype(np.float32))
    return own(a, b) if name is not None else cosine(a, b)


def make_binary() -> Method:
    """``raw-precision=binary``: the stored sign of the model's own vectors."""
    return STAGES.get(Binary.precision)(METHODS.get("raw"))()


def _stage_of(stage: type[Stage]) -> Any:
    return lambda cls: staged(cls, stage)


for _stage in (Int8, Binary):
    STAGES.add(_stage.precision, _stage_of(_stage))
