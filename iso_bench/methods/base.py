"""The contract every post-processing method follows (scikit-learn style).

``__init__`` only stores keyword parameters; ``fit(X) -> self`` learns state whose attribute names end
in ``_``; ``transform`` refuses an unfitted method. A method is named by a *spec*: its registered name,
then optional ``-``-separated arguments, positional (in the order of ``spec_args``) or ``key=value``:
``whiten-256`` is ``Whiten(n_components=256)``, ``cluster-pca-27-12`` is ``ClusterPCA(n_clusters=27,
n_directions=12)``, ``clip-dims=308,381`` gives explicit dimensions.

Parameters are checked in two stages, so that a bad spec is refused before any vector is computed:
:meth:`Method.check` with ``dim=None`` refuses what is wrong for every model (``cluster-pca-0``, a negative
count, an unknown algorithm, a number that is not finite such as ``whiten-eps=inf``; :func:`make_method` runs
it when a spec is parsed), and ``check(dim)`` what is wrong for ``dim``-d vectors (``abtt-999999`` on a 384-d
model; a caller that knows the model's dimension can run it before encoding). ``fit`` runs ``check`` on the
dimension of its input, then refuses fewer vectors than :meth:`Method.min_vectors` (the fewest it needs).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import typing
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any, ClassVar

import numpy as np

from iso_bench.methods.values import MAX_VALUE_CHARS, format_value, param_kinds, parse_value
from iso_bench.numerics.linalg import Moments, segment_sums
from iso_bench.registry import IsoBenchError, Registry

FITTING: ContextVar[str | None] = ContextVar("iso_bench_fitting", default=None)
"""What the method being fitted in this context is fitted on (``STS12``, ``file wiki.txt``), set by its caller
(:class:`iso_bench.encoder.VariantEncoder`): a method's warnings name it (:meth:`Method.who`)."""


@contextlib.contextmanager
def fitting_on(label: str) -> Iterator[None]:
    """Within it, the warnings of a method say what it is fitted on: ``label`` (:data:`FITTING`)."""
    token = FITTING.set(label)
    try:
        yield
    finally:
        FITTING.reset(token)


class MethodError(IsoBenchError, ValueError):
    """A method cannot be fitted or applied to the data it was given; the message says how to fix it."""


class NotFittedError(MethodError):
    """``transform`` was called before ``fit``."""


class Method:
    """Base class of the post-processing methods.

    Subclasses set ``name`` (the registry name), optionally ``spec_args`` (parameters that may be given
    positionally in a spec), ``default_level`` (``"sentence"`` or ``"token"``: the vectors the method is
    fitted on and applied to by default), ``fitted`` (False for methods with nothing to learn) and
    ``order`` (where ``iso-bench list`` and :func:`method_names` place the method: the order of the
    README's method table, raw first; a plugin method keeps the default and comes last).
    """

    name: ClassVar[str] = ""
    order: ClassVar[int] = 1000
    spec_args: ClassVar[tuple[str, ...]] = ()
    default_level: ClassVar[str] = "sentence"
    fitted: ClassVar[bool] = True
    streams: ClassVar[bool] = False  # learns from moments that accumulate batch by batch (partial_fit)
    scatter: ClassVar[bool] = False  # ... the scatter matrix among them, not only the mean
    extremes: ClassVar[bool] = False  # ... and how often each dimension is a vector's smallest/largest coordinate
    model_space: ClassVar[bool] = True
    """Whether :meth:`transform` gives vectors in the input's own coordinates (centred, scaled, projected, cut:
    each column still one of the model's axes or a map back onto them). False where its columns are fit-specific
    directions (principal coordinates, a flow's latent space): the same method fitted on token vectors and on
    sentence vectors then gives vectors in two different coordinate systems."""
    device: str = "cpu"
    """Where the method computes (a torch device name, no part of the spec: set it on an instance): ``"cpu"``
    (numpy), or a CUDA device, where flow trains and the large products of fit and transform run
    (:func:`iso_bench.numerics.linalg.matmul`). The numbers agree up to float rounding; a CUDA device without a GPU
    computes on the CPU."""

    # ---- parameters -------------------------------------------------------------------------------
    @classmethod
    def param_defaults(cls) -> dict[str, Any]:
        sig = inspect.signature(cls.__init__)
        return {
            p.name: p.default
            for p in sig.parameters.values()
            if p.name != "self" and p.kind is p.KEYWORD_ONLY
        }

    def get_params(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.param_defaults()}

    def who(self) -> str:
        """``method 'whiten'``, with what it is being fitted on where its caller says so (:data:`FITTING`):
        ``method 'whiten' (fit on STS12)``; what a warning starts with."""
        where = FITTING.get()
        return f"method {self.spec!r}" + (f" (fit on {where})" if where else "")

    @property
    def spec(self) -> str:
        """The canonical spec: name plus every parameter that differs from its default."""
        defaults = self.param_defaults()
        changed = {k: getattr(self, k) for k, d in defaults.items() if getattr(self, k) != d}
        parts = [self.name]
        # leading positional arguments while they are all set ("cluster-pca-10-3"), then key=value
        for key in self.spec_args:
            if key not in changed:
                break
            parts.append(format_value(changed.pop(key)))
        parts += [f"{k}={format_value(v)}" for k, v in changed.items()]
        return "-".join(parts)

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ---- checks -----------------------------------------------------------------------------------
    def check(self, dim: int | None = None) -> None:
        """Raise a :class:`MethodError` when the parameters cannot work on ``dim``-d input vectors.

        With ``dim=None`` only what does not depend on the dimension is checked (a count below its
        minimum, an unknown choice), so a spec that no model could use is refused when it is parsed.
        The message names the spec and says what is allowed. A subclass extends it and calls
        ``super().check(dim)`` first; the base refuses a dimension below 1 and any parameter that holds a
        number that is not finite (``whiten-eps=inf``, ``softdecay-alpha=nan``: ``float()`` parses both, and
        neither gives a finite score), so no subclass check compares a NaN, which passes every ``<`` test.
        """
        for key, value in self.get_params().items():
            values = value if isinstance(value, (tuple, list)) else (value,)
            written = format_value(value)
            if any(isinstance(v, (float, np.floating)) and not math.isfinite(v) for v in values):
                self._refuse(f"{key} must be a finite number, got {written}")
            if len(written) > MAX_VALUE_CHARS:
                self._refuse(f"{key}={written[:12]}... is {len(written)} characters written out; a value names the "
                             f"variant and its result folder, so at most {MAX_VALUE_CHARS} are allowed: give a "
                             "number whose decimal form is shorter (between 1e-30 and 1e30)")
        if dim is not None and dim < 1:
            self._refuse(f"input vectors need at least 1 dimension, got {dim}")

    def min_vectors(self, dim: int) -> int:
        """The fewest fit vectors of dimension ``dim`` from which the method's estimate exists.

        The base answer is 1: a method that learns from its fit vectors needs one (and records their
        dimension). A subclass whose estimate needs more (a direction of centred data, a covariance,
        a density) overrides it and says why in its docstring; ``fit`` refuses fewer vectors.
        """
        return 1

    def _shortfall(self, n: int, dim: int) -> tuple[str, str]:
        """For the too-few-vectors message: why ``min_vectors`` vectors are needed, and the other fix than
        a larger fit corpus (text that follows "use a larger fit corpus", or "" when there is none)."""
        return f"the fewest from which {self.name} learns what it estimates", ""

    def _refuse(self, problem: str) -> typing.NoReturn:
        spec = self.spec
        shown = spec if len(spec) <= 2 * MAX_VALUE_CHARS else spec[:MAX_VALUE_CHARS] + "..."
        raise MethodError(f"method {shown!r}: {problem}")

    def _check_fit_input(self, X: np.ndarray, *, float64: bool = True) -> np.ndarray:
        """What every ``fit`` does first: validate ``X`` (:meth:`_check_input`), check the parameters
        against its dimension (:meth:`check`) and refuse fewer vectors than :meth:`min_vectors`."""
        X = self._check_input(X, fitting=True, float64=float64)
        n, dim = X.shape
        self.check(dim)
        self._moments = None  # fit starts over: what partial_fit accumulated is dropped
        self._refuse_too_few(n, dim)
        return X

    def _refuse_too_few(self, n: int, dim: int) -> None:
        need = self.min_vectors(dim)
        if n < need:
            why, fewer = self._shortfall(n, dim)
            self._refuse(
                f"{n} fit vectors are too few: it needs at least {need} {dim}-d vectors ({why}); "
                f"use a larger fit corpus (--fit-corpus){fewer}"
            )

    # ---- fitting batch by batch (scikit-learn's partial_fit) ------------------------------------------
    def partial_fit(self, X: np.ndarray) -> Method:
        """Accumulate the fit statistics of a batch of vectors (``streams`` methods: float64 moments merged
        exactly, :class:`iso_bench.numerics.linalg.Moments`); the learned state is computed from them on first use
        (``transform``, or :meth:`finalize`), and equals that of ``fit`` on every batch at once up to
        rounding. ``fit`` starts over. A method that needs all its vectors at once refuses.

        >>> from iso_bench.methods.center import Center
        >>> m = Center().partial_fit(np.array([[0.0], [2.0]])).partial_fit(np.array([[4.0]]))
        >>> m.transform(np.array([[2.0]])).tolist(), m.finalize().mean_.tolist()
        ([[0.0]], [2.0])
        """
        if not self.streaming():
            self._refuse("fits on all of its vectors at once, not batch by batch; fit it on the whole fit "
                         "corpus, or a sample of it (--fit-sample)")
        X = self._check_input(X, fitting=True)
        moments = getattr(self, "_moments", None)
        if moments is None:
            self.check(X.shape[1])
            moments = self._moments = Moments(scatter=self.scatter, extremes=self.extremes, device=self.device)
        elif X.shape[1] != len(moments.mean):
            self._refuse(f"a batch of {X.shape[1]}-d vectors after batches of {len(moments.mean)}-d vectors")
        moments.update(X)
        for key in [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]:
            delattr(self, key)  # out of date: computed again on first use
        return self

    def finalize(self) -> Method:
        """Compute the learned state from what :meth:`partial_fit` accumulated, if it is not computed yet
        (refusing too few vectors as ``fit`` does); nothing after ``fit``. Returns the method."""
        moments = getattr(self, "_moments", None)
        if moments is not None and moments.n and not self.is_fitted():
            self._refuse_too_few(moments.n, len(moments.mean))
            self._from_moments(moments)
        return self

    def _from_moments(self, moments: Any) -> None:  # pragma: no cover - every streaming method defines it
        raise NotImplementedError

    def streaming(self) -> bool:
        """Whether this method, with its parameters, fits batch by batch (:meth:`partial_fit`): the class's
        ``streams``, unless a parameter rules it out (``zipfian-whiten-weights=uniform`` needs every vector's
        token type at once)."""
        return type(self).streams

    # ---- fitting ----------------------------------------------------------------------------------
    def needs_token_types(self) -> bool:
        """Whether a token-level ``fit`` takes ``token_types=`` (the tokenizer id of each token vector): the
        encoder then counts them in the fit corpus. No method but ``zipfian-whiten-weights=uniform`` does."""
        return False

    def fit(self, X: np.ndarray) -> Method:  # pragma: no cover - abstract
        raise NotImplementedError

    def transform(self, X: np.ndarray) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    def transform_means(self, X: np.ndarray, starts: np.ndarray) -> np.ndarray:
        """The mean of the transformed rows of each segment of ``X`` (segment ``i``: rows ``starts[i]`` up to
        ``starts[i + 1]``, the last to the end; none empty), shape ``(len(starts), output dim)``: token-level
        post-processing pooled into sentence vectors (the same numbers as ``Z[a:b].mean(axis=0)`` per segment).

        >>> from iso_bench.methods.center import Center
        >>> Center().fit(np.array([[0.0], [2.0]])).transform_means(np.array([[1.0], [3.0], [5.0]]), np.array([0, 1]))
        array([[0.],
               [3.]])
        """
        Z = self.transform(X)
        lengths = np.diff(np.append(starts, len(X)))
        return segment_sums(Z, starts) / lengths[:, None].astype(Z.dtype)

    def output_dim(self, dim: int) -> int:
        """The dimension of transformed vectors for ``dim``-d input, as far as it is known before fitting."""
        return dim

    def fit_transform(self, X: np.ndarray) -> np.ndarray:
        return self.fit(X).transform(X)

    def affine(self) -> tuple[np.ndarray | None, np.ndarray | None] | None:
        """``(offset, matrix)`` when the fitted transform is the affine map ``x -> (x - offset) @ matrix``
        (``offset`` (d,) or None for 0, ``matrix`` (d, d_out) or None for the identity), float64; None for a
        method that is not affine (flow, cluster-pca). ``iso-bench export`` writes an affine sentence-level
        variant as sentence-transformers' own ``Dense`` modules; the contract checks the map against
        ``transform``.

        >>> from iso_bench.methods.center import Center
        >>> Center().fit(np.array([[0.0], [2.0]])).affine()[0].tolist()
        [1.0]
        """
        return None

    def _per_fit(self, name: str, fitted: np.ndarray, compute: typing.Callable[[], np.ndarray]) -> np.ndarray:
        """``compute()``, kept in attribute ``name`` until the method is fitted again: ``fitted`` is an array each
        fit replaces (``V_``, ``W_``), so a new fit computes it anew."""
        cached = getattr(self, name, None)
        if cached is None or cached[0] is not fitted:
            cached = (fitted, compute())
            setattr(self, name, cached)
        return cached[1]

    def is_fitted(self) -> bool:
        return not self.fitted or any(k.endswith("_") and not k.startswith("_") for k in vars(self))

    def _check_fitted(self) -> None:
        self.finalize()
        if not self.is_fitted():
            raise NotFittedError(
                f"method {self.spec!r} is not fitted: call fit(X) on a fit corpus before transform(X)"
            )

    def _check_input(self, X: np.ndarray, *, fitting: bool, float64: bool = True) -> np.ndarray:
        """Validate and convert ``X`` to a 2-D float64 array, with errors that name the method; input to
        a fitted method must have the dimension it was fitted on.

        ``float64=False`` keeps float32 input float32 and float64 float64, C-ordered (no float64 copy of a
        large matrix: the method converts block by block, or computes in float32). Every check and message
        is the same: the shape, dtype and dimension checks run on a zero-row view; finiteness is one sum,
        finite only if every entry is, and only when it is not are the rows scanned (naming the bad ones, or
        finding an overflow of the sum)."""
        X = np.asarray(X)
        if not float64 and X.ndim == 2 and X.dtype in (np.float32, np.float64):
            Method._check_input(self, X[:0], fitting=fitting)
            with np.errstate(over="ignore", invalid="ignore"):
                finite = np.isfinite(X.sum())
            if not finite:
                Method._check_input(self, X, fitting=fitting)
            return np.ascontiguousarray(X)
        if X.ndim != 2:
            raise MethodError(f"method {self.spec!r}: expected a 2-D array (n_vectors, dim), got shape {X.shape}")
        if not np.issubdtype(X.dtype, np.number):
            raise MethodError(f"method {self.spec!r}: expected numbers, got dtype {X.dtype}")
        X = X.astype(np.float64, copy=False)
        if not np.isfinite(X).all():
            bad = int((~np.isfinite(X)).any(axis=1).sum())
            raise MethodError(
                f"method {self.spec!r}: {bad} of {len(X)} input vectors contain NaN or infinity; "
                "check the encoder output (fp16 overflow, empty texts) before fitting"
            )
        if not fitting and getattr(self, "dim_", None) is not None and X.shape[1] != self.dim_:
            raise MethodError(
                f"method {self.spec!r} was fitted on {self.dim_}-d vectors but got {X.shape[1]}-d vectors"
            )
        return X


METHODS: Registry[type[Method]] = Registry("method")
STAGES: Registry[Any] = Registry("precision")
"""The storage stages every method takes (``-precision=int8``, ``-precision=binary``): each a function of a method
class giving the class of that method with the stage after it (:mod:`iso_bench.methods.stages` registers them)."""


def register(cls: type[Method]) -> type[Method]:
    """Class decorator: register a method under its ``name``."""
    METHODS.add(cls.name, cls)
    return cls


def method_names() -> list[str]:
    """The registered method names in listing order (``order``, then name).

    >>> from iso_bench.methods import method_names  # importing the package registers every method
    >>> method_names()[:3]
    ['raw', 'center', 'mean-proj']
    """
    return sorted(METHODS, key=lambda name: (METHODS.get(name).order, name))


def parse_spec(spec: str) -> tuple[type[Method], dict[str, Any]]:
    """Split a spec into its method class and keyword parameters (also ``level`` and ``precision`` if given)."""
    # the longest registered name that the spec starts with ("cluster-pca" before "cluster")
    candidates = [n for n in METHODS if spec == n or spec.startswith(n + "-")]
    if not candidates:
        head = spec.split("-")[0]
        raise MethodError(METHODS.unknown_message(head if head not in ("cluster",) else spec))
    name = max(candidates, key=len)
    cls = METHODS.get(name)
    defaults = cls.param_defaults()
    kinds = param_kinds(cls)
    rest = spec[len(name) + 1 :]
    args: list[str] = []
    for part in rest.split("-") if rest else []:
        if args and (args[-1].endswith("=") or args[-1] == ""):
            args[-1] += "-" + part  # a negative value: "alpha=-0.2", positionally "name--0.2"
        else:
            args.append(part)
    params: dict[str, Any] = {}
    positional = list(cls.spec_args)
    for arg in args:
        if "=" in arg:
            key, _, text = arg.partition("=")
        else:
            if not positional:
                raise MethodError(
                    f"method spec {spec!r}: too many positional arguments; {name} takes "
                    f"{', '.join(cls.spec_args) or 'none'} (or key=value among {', '.join(defaults)})"
                )
            key, text = positional.pop(0), arg
        if key in ("level", "precision"):  # what every method takes, beside its own parameters
            allowed = ("sentence", "token") if key == "level" else tuple(STAGES)
            if text not in allowed:
                allowed = " or ".join(map(repr, allowed))
                raise MethodError(f"method spec {spec!r}: {key} must be {allowed}, got {text!r}")
            params[key] = text
            continue
        if key not in defaults:
            raise MethodError(
                f"method spec {spec!r}: {name} has no parameter {key!r}; parameters: {', '.join(defaults) or 'none'}"
            )
        if key in positional:
            positional.remove(key)
        try:
            params[key] = parse_value(text, defaults[key], kinds.get(key))
        except ValueError:
            raise MethodError(f"method spec {spec!r}: {key}={text!r} is not a valid value") from None
    return cls, params


def make_method(spec: str) -> tuple[Method, str]:
    """Build the method a spec names. Returns ``(method, level)``.

    >>> method, level = make_method("whiten-256")
    >>> method.n_components, level
    (256, 'sentence')

    Parameters that no model could use are refused here (:meth:`Method.check` with ``dim=None``):

    >>> make_method("cluster-pca-0")
    Traceback (most recent call last):
    ...
    iso_bench.methods.base.MethodError: method 'cluster-pca-0': n_clusters must be at least 1, got 0
    """
    cls, params = parse_spec(spec)
    level, precision = params.pop("level", cls.default_level), params.pop("precision", None)
    method = cls(**params) if precision is None else STAGES.get(precision)(cls)(**params)
    method.check(None)
    return method, level
