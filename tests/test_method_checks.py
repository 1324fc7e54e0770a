"""Method checks: parameters refused before any vector is computed, and fits refused that have too few vectors.

``check(None)`` runs when a spec is parsed, ``check(dim)`` when the model's dimension is known, and ``fit``
runs ``check`` on its input's dimension and refuses fewer vectors than ``min_vectors(dim)``.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

import numpy as np
import pytest

from iso_bench.methods import Method, MethodError, make_method
from iso_bench.methods.abtt import Abtt
from iso_bench.methods.center import Center
from iso_bench.methods.clip import Clip
from iso_bench.methods.cluster_pca import ClusterPCA
from iso_bench.methods.flow import Flow
from iso_bench.methods.raw import Raw
from iso_bench.methods.whiten import Whiten


def gaussian(n: int, d: int, seed: int = 0) -> np.ndarray:
    """``n`` draws of a ``d``-d Gaussian with a random covariance: in general position (n <= d + 1
    vectors span an (n - 1)-d affine subspace)."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d)


# ---- check(None): wrong for every model, refused when the spec is parsed ------------------------------
@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("cluster-pca-0", "n_clusters must be at least 1, got 0"),
        ("cluster-pca-algorithm=dbscan", "unknown algorithm 'dbscan'; use one of kmeans, gmm"),
        ("cluster-pca-init=random", "unknown init 'random'; use one of points, kmeanspp"),
        ("cluster-pca-algorithm=gmm-init=kmeanspp", "init=kmeanspp seeds k-means; algorithm=gmm has no such choice"),
        ("abtt-0", "n_components must be at least 1"),
        ("whiten-0", "n_components must be at least 1"),
        ("clip-min_fraction=1.5", r"min_fraction must be in \(0, 1\], got 1.5"),
        ("flow-levels=0", "levels must be at least 1, got 0$"),
        ("flow-depth=0-width=0", "depth must be at least 1, got 0; width must be at least 1, got 0$"),
        ("flow-arch=affine-n_blocks=0", "n_blocks must be at least 1, got 0$"),
        ("flow-lr=0", "lr must be > 0"),
        ("flow-arch=affine-hidden=0-batch_size=0", "hidden must be at least 1, got 0; batch_size must be at least 1, "
         "got 0$"),
        ("flow-arch=realnvp", "unknown arch 'realnvp'; use one of glow, affine$"),
        ("flow-permutation=shuffle", "unknown permutation 'shuffle'; use one of reverse, invconv$"),
        ("flow-hidden=64", "hidden belongs to arch=affine, not to arch=glow$"),
        ("flow-arch=affine-levels=2-permutation=invconv",
         "levels, permutation belong to arch=glow, not to arch=affine$"),
    ],
)
def test_make_method_refuses_a_spec_wrong_for_every_model(spec: str, says: str) -> None:
    with pytest.raises(MethodError, match=f"^method '{re.escape(spec)}': {says}"):
        make_method(spec)


def test_the_command_line_refuses_such_a_spec_when_it_parses_it() -> None:
    from iso_bench.cli import method_spec

    with pytest.raises(argparse.ArgumentTypeError, match="n_clusters must be at least 1"):
        method_spec("cluster-pca-0")
    assert method_spec("cluster-pca-1-0") == "cluster-pca-1-0"


@pytest.mark.parametrize(
    ("method", "says"),
    [
        (ClusterPCA(n_directions=-1), r"n_directions must be at least 0 \(directions removed per cluster\), got -1"),
        (Clip(dims=(3, -2)), r"dimensions \[-2\] are negative"),
        (Whiten(eps=-0.1), "eps must be >= 0"),
        (Flow(steps=-1), "steps must be at least 1"),
        (Clip(min_z=-1.0), "min_z must be >= 0"),
    ],
)
def test_check_without_a_dimension_refuses_negative_values(method: Method, says: str) -> None:
    # a spec cannot carry a negative number ("-" separates its arguments): these come from Python callers
    with pytest.raises(MethodError, match=says):
        method.check()


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("whiten-eps=inf", "eps must be a finite number, got inf$"),
        ("whiten-eps=nan", "eps must be a finite number, got nan$"),
        ("zca-eps=1e999", "eps must be a finite number, got inf$"),  # float() overflows to inf
        ("softdecay-alpha=nan", "alpha must be a finite number, got nan$"),
        ("clip-min_z=inf", "min_z must be a finite number, got inf$"),
        ("flow-lr=nan", "lr must be a finite number, got nan$"),
        ("flow-steps=0", r"steps must be at least 1 \(Adam steps; 0 would score the untrained flow"),
    ],
)
def test_a_number_that_is_not_finite_and_zero_flow_steps_are_refused_when_the_spec_is_parsed(spec: str,
                                                                                            says: str) -> None:
    from iso_bench.cli import method_spec

    with pytest.raises(MethodError, match=f"^method '{re.escape(spec.replace('1e999', 'inf'))}': {says}"):
        make_method(spec)
    with pytest.raises(argparse.ArgumentTypeError, match=says):  # iso-bench run --methods refuses it while parsing
        method_spec(spec)


@pytest.mark.parametrize("spec", ["whiten-eps=1e300", "softdecay-alpha=0.0000000000000000000000000000000000000001"])
def test_a_value_too_long_to_name_a_result_folder_is_refused_when_the_spec_is_parsed(spec: str) -> None:
    """1e300 written positionally is 301 digits: the variant's result folder could not be made (a file name has
    at most 255 bytes). The spec is refused with the parameter named, never an OSError from deep in a run."""
    from iso_bench.cli import method_spec

    key = spec.split("-", 1)[1].split("=")[0]
    says = rf"{key}=\S+\.\.\. is \d+ characters written out; .* at most 40 are allowed"
    with pytest.raises(MethodError, match=f"^method '[^']{{1,83}}': {says}"):  # the spec shortened where long
        make_method(spec)
    with pytest.raises(argparse.ArgumentTypeError, match=says):
        method_spec(spec)
    assert make_method("whiten-eps=0.00000000000000000001")[0].spec == "whiten-eps=0.00000000000000000001"  # 22


def _numeric_params() -> list[tuple[type, str]]:
    """(method class, parameter) for every parameter of every registered method that holds a number."""
    import typing

    from iso_bench.methods import METHODS

    out = []
    for name in sorted(METHODS):
        cls = METHODS.get(name)
        hints = typing.get_type_hints(cls.__init__)
        for key, default in cls.param_defaults().items():
            kinds = set(typing.get_args(hints[key])) | {hints[key]}
            if not isinstance(default, bool) and (isinstance(default, (int, float)) or kinds & {int, float}):
                out.append((cls, key))
    return out


@pytest.mark.parametrize(("cls", "key"), _numeric_params(), ids=lambda v: getattr(v, "name", v))
@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")], ids=["nan", "inf", "-inf"])
def test_every_numeric_parameter_of_every_method_refuses_a_value_that_is_not_finite(cls: type, key: str,
                                                                                   value: float) -> None:
    # the same check that refuses zca-eps=-1 (check(None), run when a spec is parsed and again by fit)
    method = cls(**{key: value})
    with pytest.raises(MethodError, match=f"{key} must be a finite number, got {value}"):
        method.check()
    with pytest.raises(MethodError, match=f"{key} must be a finite number"):
        method.fit(gaussian(50, 8))


# ---- check(dim): wrong for this model's dimension ---------------------------------------------------
@pytest.mark.parametrize(
    ("spec", "dim", "says"),
    [
        ("abtt-999999", 384, "n_components must be between 1 and 383 for 384-d vectors, got 999999"),
        ("abtt-384", 384, "n_components must be between 1 and 383 for 384-d vectors, got 384"),
        ("abtt", 1, "needs vectors of at least 2 dimensions"),
        ("whiten-4000", 384, "n_components must be between 1 and 384 for 384-d vectors, got 4000"),
        ("clip-dims=9999", 384, r"dimensions \[9999\] are out of range for 384-d vectors: dims run 0..383"),
        ("clip-dims=3,384", 384, r"dimensions \[384\] are out of range for 384-d vectors: dims run 0..383"),
        ("clip", 2, "detecting outlier dimensions needs vectors of at least 3 dimensions, got 2-d; give the"),
        ("cluster-pca-27-384", 384, "n_directions must be between 0 and 383 for 384-d vectors, got 384"),
        ("flow", 4, r"needs dim >= 5 \(3 levels halve the coordinates 2 times and the last level's couplings split "
         r"the rest in two\), got 4-d vectors$"),
        ("flow-levels=10", 384, r"needs dim >= 513 \(10 levels halve the coordinates 9 times"),
        ("flow-levels=1", 1, r"needs dim >= 2 \(the coupling splits the coordinates in two\), got 1-d vectors$"),
        ("flow-arch=affine", 1, r"needs dim >= 2 \(the coupling splits the coordinates in two\), got 1-d vectors$"),
        ("center", 0, "input vectors need at least 1 dimension, got 0"),
        ("raw", 0, "input vectors need at least 1 dimension, got 0"),
    ],
)
def test_check_refuses_parameters_wrong_for_the_dimension(spec: str, dim: int, says: str) -> None:
    method, _ = make_method(spec)  # nothing wrong whatever the model
    with pytest.raises(MethodError, match=f"^method {re.escape(repr(method.spec))}: {says}"):  # the canonical spec
        method.check(dim)


@pytest.mark.parametrize(
    ("spec", "dim"),
    [("abtt-383", 384), ("abtt", 2), ("whiten-384", 384), ("clip-dims=0,383", 384), ("clip", 3),
     ("cluster-pca-27-383", 384), ("cluster-pca-1-0", 1), ("flow", 5), ("flow-levels=2", 3), ("flow-levels=9", 257),
     ("flow-arch=affine", 2), ("center", 1)],
)
def test_check_accepts_the_edge_values(spec: str, dim: int) -> None:
    make_method(spec)[0].check(dim)


def test_fit_checks_the_parameters_against_its_input() -> None:
    X = gaussian(50, 8)
    with pytest.raises(MethodError, match="n_components must be between 1 and 7 for 8-d vectors, got 8"):
        Abtt(n_components=8).fit(X)
    with pytest.raises(MethodError, match=r"dims run 0..7"):
        Clip(dims=(8,)).fit(X)


def test_the_largest_allowed_parameters_fit() -> None:
    X = gaussian(50, 8)
    # removing 7 of 8 directions leaves the centred vectors on one line
    out = Abtt(n_components=7).fit(X).transform(X)
    assert np.linalg.matrix_rank(out, tol=1e-8) == 1
    out = ClusterPCA(n_clusters=1, n_directions=7).fit(X).transform(X)
    assert np.linalg.matrix_rank(out, tol=1e-8) == 1
    white = Whiten(n_components=8).fit(X)
    np.testing.assert_allclose(np.cov(white.transform(X), rowvar=False), np.eye(8), atol=1e-6)
    clipped = Clip(dims=(0, 7)).fit(X).transform(X)
    assert not clipped[:, [0, 7]].any() and clipped[:, 1:7].all()


# ---- min_vectors ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("method", "dim", "expected"),
    [
        (Raw(), 384, 1),
        (Center(), 384, 1),  # a mean of one vector
        (Abtt(n_components=7), 768, 8),  # 7 directions of centred vectors: 7 + 1
        (Abtt(), 768, 9),  # default D = round(768 / 100) = 8
        (Abtt(), 384, 5),  # round(3.84) = 4
        (Abtt(), 32, 2),  # round(0.32) = 0, at least 1
        (Whiten(), 384, 385),  # full covariance of rank 384: 384 + 1
        (Whiten(n_components=256), 384, 257),
        (Whiten(eps=0.001), 384, 2),  # regularised: a covariance (ddof=1) of two vectors
        (Flow(), 384, 385),  # more vectors than dimensions
        (Flow(arch="affine"), 384, 385),
        (Clip(), 384, 21),  # min_fraction 0.05: 1/20 reaches it, 1/21 does not
        (Clip(), 64, 7),  # min_fraction 10/64 = 0.15625: 1/6 = 0.167 reaches it, 1/7 = 0.143 does not
        (Clip(), 16, 3),  # min_fraction 0.5: 1/2 reaches it
        (Clip(min_fraction=0.2), 384, 6),  # 1/5 = 0.2 reaches 0.2
        (Clip(dims=(3,)), 384, 1),  # nothing estimated
        (ClusterPCA(), 384, 351),  # 27 clusters * (12 + 1)
        (ClusterPCA(n_clusters=10, n_directions=3), 768, 40),
        (ClusterPCA(n_clusters=5, n_directions=0), 768, 5),
    ],
)
def test_min_vectors(method: Method, dim: int, expected: int) -> None:
    assert method.min_vectors(dim) == expected


@pytest.mark.parametrize(
    ("make", "dim", "need"),
    [
        (Center, 4, 1),
        (lambda: Abtt(n_components=3), 8, 4),
        (lambda: Whiten(n_components=5), 8, 6),
        (Whiten, 8, 9),
        (lambda: Whiten(eps=0.001), 8, 2),
        (lambda: Flow(steps=2), 5, 6),
        (lambda: Flow(arch="affine", steps=2), 3, 4),
        (Clip, 16, 3),
        (lambda: ClusterPCA(n_clusters=1, n_directions=2), 8, 3),
    ],
)
def test_fit_takes_min_vectors_and_refuses_one_fewer(make: Callable[[], Method], dim: int, need: int) -> None:
    X = gaussian(need, dim)
    assert make().min_vectors(dim) == need
    fitted = make().fit(X)
    assert np.isfinite(fitted.transform(X)).all()
    if need > 1:
        with pytest.raises(MethodError, match=f"{need - 1} fit vectors are too few: it needs at least {need} {dim}-d"):
            make().fit(X[:-1])


def test_too_few_token_vectors_for_cluster_pca_are_refused_before_clustering(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_clustering(self: ClusterPCA, X: np.ndarray) -> None:
        raise AssertionError("clustering started")

    monkeypatch.setattr(ClusterPCA, "_cluster", no_clustering)
    X = gaussian(29, 384)  # the token vectors of a few short texts
    # 27 clusters of 13 need 351; 29 vectors fill 29 // 13 = 2 clusters of 13
    with pytest.raises(MethodError) as info:
        make_method("cluster-pca")[0].fit(X)
    message = str(info.value)
    assert message.startswith("method 'cluster-pca': 29 fit vectors are too few: it needs at least 351 384-d")
    assert "use a larger fit corpus (--fit-corpus) or fewer clusters/directions, e.g. cluster-pca-2-12" in message
    # fewer vectors than one cluster needs: one cluster, n - 1 directions
    with pytest.raises(MethodError, match=r"e\.g\. cluster-pca-1-9-algorithm=gmm$"):
        ClusterPCA(algorithm="gmm").fit(X[:10])


def test_too_few_vectors_messages_name_the_fix() -> None:
    with pytest.raises(MethodError, match=r"'abtt-7': 5 fit vectors are too few: it needs at least 8 .* "
                       r"\(--fit-corpus\) or fewer directions, e\.g\. abtt-4$"):
        Abtt(n_components=7).fit(gaussian(5, 16))
    with pytest.raises(MethodError, match=r"'whiten': 10 fit vectors.*at least 17 16-d.*singular\); use a larger fit "
                       r"corpus \(--fit-corpus\), keep fewer columns \(whiten-9\) or "
                       r"regularise \(whiten-eps=0\.001\)$"):
        Whiten().fit(gaussian(10, 16))
    with pytest.raises(MethodError, match=r"'flow': 16 fit vectors.*at least 17 16-d.*affine subspace of dimension "
                       r"<= 15"):
        Flow().fit(gaussian(16, 16))
    with pytest.raises(MethodError, match=r"'clip': 20 fit vectors.*at least 21 384-d.*min_fraction = 0\.05.*"
                       r"clip-dims=\.\.\.$"):
        Clip().fit(gaussian(20, 384))
