"""The defaults of cluster-pca and flow are the methods their names cite.

cluster-pca clusters as Rajaee & Pilehvar's notebook does, with scipy's ``kmeans2(X, k, minit='points')``;
flow is BERT-flow's Glow (``config_l3_d3_w32``: 3 levels of 3 steps, additive couplings of width 32, channel
reversal, actnorm, a standard normal prior).
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from iso_bench.methods import MethodError, glow, make_method
from iso_bench.methods.cluster_pca import ClusterPCA
from iso_bench.methods.flow import Flow
from iso_bench.methods.glow_trainer import Trainer


def mixture(n: int = 600, d: int = 6, seed: int = 0) -> np.ndarray:
    """Eight overlapping anisotropic blobs: 10 Lloyd iterations have not converged on them, so the
    labels of kmeans2's last assignment differ from the nearest of its returned centroids."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(8, d)) * 3.0
    return centres[rng.integers(0, 8, size=n)] + rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) * 0.7


def kmeans2(X: np.ndarray, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """scipy's kmeans2 as the authors call it, drawing its initial points from default_rng(seed)."""
    from scipy.cluster import vq

    key = "rng" if "rng" in inspect.signature(vq.kmeans2).parameters else "seed"
    return vq.kmeans2(X, k, minit="points", **{key: np.random.default_rng(seed)})


# ---- cluster-pca: the authors' clustering -------------------------------------------------------------
def test_cluster_pca_defaults_to_the_authors_initialisation() -> None:
    method, level = make_method("cluster-pca")
    assert (method.n_clusters, method.n_directions, method.algorithm, method.init, level) == (
        27, 12, "kmeans", "points", "token")
    assert method.spec == "cluster-pca"
    assert make_method("cluster-pca-init=kmeanspp")[0].spec == "cluster-pca-init=kmeanspp"


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_cluster_pca_labels_are_those_of_kmeans2(seed: int) -> None:
    from scipy.cluster.vq import vq

    X = mixture()
    centroids, labels = kmeans2(X, 8, seed)
    method = ClusterPCA(n_clusters=8, n_directions=2, seed=seed).fit(X)
    np.testing.assert_array_equal(method.predict(X), labels)
    np.testing.assert_array_equal(method.cluster_sizes_, np.bincount(labels, minlength=8))
    # kmeans2's returned centroids are the means of the members of its returned labels
    np.testing.assert_allclose(method.means_, centroids, atol=1e-12)
    if seed in (0, 1):  # here the nearest returned centroid would move some vectors to another cluster
        assert (vq(X, centroids)[0] != labels).any()


def test_cluster_pca_transform_processes_each_fit_vector_in_its_kmeans2_cluster() -> None:
    X = mixture()
    _, labels = kmeans2(X, 8, 0)
    out = ClusterPCA(n_clusters=8, n_directions=2, seed=0).fit(X).transform(X)
    for j in range(8):
        members = X[labels == j] - X[labels == j].mean(axis=0)
        _, _, vt = np.linalg.svd(members, full_matrices=False)
        expected = members - members @ vt[:2].T @ vt[:2]  # the projection does not depend on the signs
        np.testing.assert_allclose(out[labels == j], expected, atol=1e-10)


def near_ties(d: int = 48, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``(X, centroids)``: rows whose two nearest centroids are at squared distances equal up to 1e-6 ..
    1e-10 relative (float32 cannot tell them apart, float64 can), exact ties with a repeated centroid, and
    ordinary rows; the centroids float64, off the origin as token vectors are."""
    rng = np.random.default_rng(seed)
    centroids = rng.normal(size=(6, d)) + 4.0
    centroids[5] = centroids[2]  # a repeated centroid: vq takes the first, 2
    rows = [centroids[rng.integers(0, 5, 200)] + rng.normal(size=(200, d))]
    for a, b in [(0, 1), (1, 3), (2, 4), (0, 4)]:
        axis = (centroids[a] - centroids[b]) / np.linalg.norm(centroids[a] - centroids[b])
        across = rng.normal(size=(50, d)) * 0.3
        across -= np.outer(across @ axis, axis)  # on the bisecting hyperplane: equidistant from a and b
        scale = np.sum((centroids[a] - centroids[b]) ** 2)
        for rel in (1e-6, 1e-7, 1e-8, 1e-10):  # moving t along the axis changes the squared gap by 2 t |a - b|
            shift = rng.choice([-1.0, 1.0], size=(50, 1)) * rel * scale / (2.0 * np.sqrt(scale))
            rows.append((centroids[a] + centroids[b]) / 2.0 + across + shift * axis)
    return np.vstack(rows), centroids


def test_cluster_pca_assignment_is_vq_on_near_ties_in_float32_and_float64() -> None:
    from scipy.cluster.vq import vq

    from iso_bench.methods.cluster_pca import _nearest

    X, centroids = near_ties()
    X32 = X.astype(np.float32)
    for values in (X, X32):  # kmeans2 runs vq on float64 values (of the float32 ones for float32 input)
        expected = vq(values.astype(np.float64), centroids)[0]
        np.testing.assert_array_equal(_nearest(values, centroids), expected)
    # the data have teeth: a plain float32 nearest centroid gets some near-tied rows wrong
    plain = np.argmin(np.sum(centroids**2, axis=1).astype(np.float32) - 2.0 * X32 @ centroids.T.astype(np.float32),
                      axis=1)
    assert (plain != vq(X32.astype(np.float64), centroids)[0]).any()
    assert 5 not in _nearest(X32, centroids)  # a repeated centroid loses every tie to the first


def test_cluster_pca_float32_input_clusters_as_its_float64_values() -> None:
    X32 = mixture(n=2000, d=24).astype(np.float32)
    X64 = X32.astype(np.float64)
    fast = ClusterPCA(n_clusters=8, n_directions=3, seed=1).fit(X32)
    exact = ClusterPCA(n_clusters=8, n_directions=3, seed=1).fit(X64)
    _, labels = kmeans2(X64, 8, 1)
    np.testing.assert_array_equal(fast.predict(X32), labels)
    np.testing.assert_array_equal(exact.predict(X64), labels)
    # the same float64 sums of the same values: centroids and means equal to the last bit
    np.testing.assert_array_equal(fast.centroids_, exact.centroids_)
    np.testing.assert_array_equal(fast.means_, exact.means_)
    # float32 scatter matrices and arithmetic: the same subspaces and outputs to float32 precision
    for j in range(8):
        a, b = fast.components_[j], exact.components_[j]
        np.testing.assert_allclose(a @ b.T @ b, a, atol=1e-4)
    out = fast.transform(X32)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, exact.transform(X64), atol=1e-4 * np.abs(X32).max())


def test_cluster_pca_refuses_non_finite_float32_input_as_the_base_class_does() -> None:
    X = mixture().astype(np.float32)
    X[[3, 8], 1] = [np.nan, np.inf]
    with pytest.raises(MethodError, match=r"'cluster-pca-8-2': 2 of 600 input vectors contain NaN or infinity"):
        ClusterPCA(n_clusters=8, n_directions=2).fit(X)
    method = ClusterPCA(n_clusters=8, n_directions=2).fit(mixture().astype(np.float32))
    with pytest.raises(MethodError, match="2 of 600 input vectors contain NaN"):
        method.transform(X)
    with pytest.raises(MethodError, match="fitted on 6-d vectors but got 5-d"):
        method.transform(mixture()[:, :5].astype(np.float32))
    with pytest.raises(MethodError, match="expected a 2-D array"):
        method.transform(mixture()[0].astype(np.float32))
    big = np.full((600, 6), 3e38, dtype=np.float32)  # finite, but its sum overflows
    assert ClusterPCA(n_clusters=1, n_directions=0)._check_input(big, fitting=True) is big


def test_cluster_pca_seed_draws_other_initial_points() -> None:
    X = mixture()
    first = ClusterPCA(n_clusters=8, n_directions=2, seed=0).fit(X).predict(X)
    np.testing.assert_array_equal(ClusterPCA(n_clusters=8, n_directions=2, seed=0).fit(X).predict(X), first)
    assert not np.array_equal(ClusterPCA(n_clusters=8, n_directions=2, seed=1).fit(X).predict(X), first)


def test_cluster_pca_kmeanspp_is_one_scikit_learn_kmeans_run() -> None:
    from sklearn.cluster import KMeans

    X = mixture()
    method = ClusterPCA(n_clusters=8, n_directions=2, init="kmeanspp", seed=3).fit(X)
    km = KMeans(n_clusters=8, init="k-means++", n_init=1, max_iter=10, tol=0.0, random_state=3).fit(X)
    np.testing.assert_array_equal(method.predict(X), km.labels_)
    np.testing.assert_allclose(method.centroids_, km.cluster_centers_)
    assert not np.array_equal(method.predict(X), ClusterPCA(n_clusters=8, n_directions=2, seed=3).fit(X).predict(X))


def test_cluster_pca_gmm_assigns_as_scikit_learn_predicts() -> None:
    from sklearn.mixture import GaussianMixture

    X = mixture()
    method = ClusterPCA(n_clusters=8, n_directions=2, algorithm="gmm", seed=0).fit(X)
    gmm = GaussianMixture(n_components=8, covariance_type="diag", random_state=0).fit(X)
    np.testing.assert_array_equal(method.predict(X), gmm.predict(X))
    new = mixture(n=50, seed=1)
    np.testing.assert_array_equal(method.predict(new), gmm.predict(new))


@pytest.mark.parametrize("spec", ["cluster-pca-8-2", "cluster-pca-8-2-init=kmeanspp", "cluster-pca-8-2-algorithm=gmm"])
def test_cluster_pca_keeps_numpy_arrays_only(spec: str) -> None:
    method = make_method(spec)[0].fit(mixture())
    learned = {k: v for k, v in vars(method).items() if k.endswith("_")}
    assert {"centroids_", "means_", "components_", "n_directions_", "cluster_sizes_", "dim_"} <= set(learned)
    for key, value in learned.items():
        assert value is None or isinstance(value, (np.ndarray, int)), key
    assert (method.weights_ is None) == (method.algorithm == "kmeans")


# ---- flow: BERT-flow's Glow ---------------------------------------------------------------------------
def correlated(n: int = 1500, d: int = 16, seed: int = 0) -> np.ndarray:
    """Correlated, skewed vectors (a Gaussian through a random linear map, one coordinate squared)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) @ rng.normal(size=(d, d)) + rng.normal(size=d)
    X[:, 0] = X[:, 0] ** 2
    return X


@pytest.fixture(scope="module")
def glow16() -> Flow:
    return Flow(steps=60).fit(correlated())


def test_flow_defaults_to_bertflow_glow(glow16: Flow) -> None:
    method, level = make_method("flow")
    assert (method.arch, method.levels, method.depth, method.width, method.permutation, level) == (
        "glow", 3, 3, 32, "reverse", "sentence")
    levels = glow16.blocks_
    assert [len(steps) for steps in levels] == [3, 3, 3]  # 3 levels of depth 3: 9 steps
    assert [steps[0]["bias"].shape[0] for steps in levels] == [16, 8, 4]  # each level hands half on
    for steps in levels:
        for step in steps:
            c = step["bias"].shape[0]
            # the coupling network: c // 2 -> 32 -> 32 -> c - c // 2
            assert step["W1"].shape == (c // 2, 32) and step["W2"].shape == (32, 32)
            assert step["W3"].shape == (32, c - c // 2)
            assert "W" not in step  # the channel reversal has no parameters
    assert np.abs(levels[0][0]["W3"]).max() > 0  # trained: the couplings are no longer the identity


def numeric_jacobian(f, x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """d f(x) / d x for one row ``x`` (shape (1, d)) by central differences."""
    d = x.shape[1]
    cols = []
    for i in range(d):
        step = np.zeros_like(x)
        step[0, i] = eps
        cols.append((f(x + step) - f(x - step))[0] / (2 * eps))
    return np.stack(cols, axis=1)


def test_an_additive_coupling_has_log_determinant_zero(glow16: Flow) -> None:
    step = glow16.blocks_[0][1]
    x = glow16._standardise(correlated(n=3, seed=4))[:1]
    jac = numeric_jacobian(lambda v: glow.couple(step, v, np), x)
    assert np.abs(jac - np.eye(16)).max() > 1e-3  # the coupling does something
    sign, logdet = np.linalg.slogdet(jac)
    assert sign == 1.0 and abs(logdet) < 1e-6


@pytest.mark.parametrize("permutation", ["reverse", "invconv"])
def test_glow_log_determinant_is_the_actnorm_and_1x1_terms(permutation: str) -> None:
    X = correlated(d=7)  # 7 coordinates: levels of 7, 4, 2 (odd splits included)
    flow = Flow(steps=40, permutation=permutation).fit(X)
    levels = flow.blocks_
    terms = sum(glow.LOGSCALE_FACTOR * step["logs"].sum() + step.get("logdet_W", 0.0)
                for steps in levels for step in steps)
    x = flow._standardise(X[:1])
    _, logdet = glow.forward(levels, x, np)
    assert logdet == pytest.approx(terms, abs=1e-12)
    _, true = np.linalg.slogdet(numeric_jacobian(lambda v: glow.forward(levels, v, np)[0], x))
    assert logdet == pytest.approx(true, abs=1e-5)
    assert ("W" in levels[0][0]) == (permutation == "invconv")
    # the prior is a fixed N(0, I): the likelihood is its density at z times the volume change
    zs, _ = glow.forward(levels, flow._standardise(X), np)
    prior = -0.5 * (zs * zs).sum(axis=1) - 0.5 * 7 * np.log(2 * np.pi)
    assert flow.log_likelihood(X) == pytest.approx(prior.mean() + logdet - np.log(flow.scale_).sum())


@pytest.mark.parametrize("rows", [1, 2, None])
@pytest.mark.parametrize("permutation", ["reverse", "invconv"])
def test_glow_numpy_forward_is_the_step_by_step_forward_exactly(permutation: str, rows: int | None) -> None:
    X = correlated(d=13)  # levels of 13, 7 and 4 coordinates: odd halves included
    flow = Flow(steps=40, permutation=permutation).fit(X)
    X = X[:rows]  # one text (a one-query split), two, all
    x = flow._standardise(X)
    z, logdet = glow.forward(flow.blocks_, x, np)  # numpy: the transform's path
    z_steps, logdet_steps = glow._forward_steps(flow.blocks_, x, np)
    np.testing.assert_array_equal(z, z_steps)  # the same arithmetic, element for element
    assert logdet == logdet_steps
    np.testing.assert_array_equal(x, flow._standardise(X))  # the input is left as it was


@pytest.mark.parametrize("d", [16, 13])
def test_glow_inverts(d: int) -> None:
    X = correlated(d=d)
    flow = Flow(steps=40).fit(X)
    assert np.abs(flow.inverse(flow.transform(X)) - X).max() < 1e-4
    z = np.random.default_rng(5).normal(size=(10, d))
    assert np.abs(flow.transform(flow.inverse(z)) - z).max() < 1e-4


def test_glow_training_is_seeded() -> None:
    X = correlated()
    first = Flow(steps=20, seed=1).fit(X).transform(X)
    np.testing.assert_array_equal(Flow(steps=20, seed=1).fit(X).transform(X), first)
    assert not np.array_equal(Flow(steps=20, seed=2).fit(X).transform(X), first)


@pytest.mark.parametrize("permutation", ["reverse", "invconv"])
def test_glow_trainer_gradient_is_autograds(permutation: str) -> None:
    # glow.Trainer's hand-written backward pass (parameters in its stored order, the channel reversals
    # folded into them) against autograd through glow.forward, in float64; 7 coordinates: levels of 7, 4
    # and 2, odd splits included
    torch = pytest.importorskip("torch")
    X = correlated(n=300, d=7)
    x = torch.as_tensor((X - X.mean(axis=0)) / X.std(axis=0))
    torch.manual_seed(0)
    params = [[{k: v.detach().double() if v.is_floating_point() else v for k, v in step.items()} for step in steps]
              for steps in glow.init(torch, 7, 3, 3, 8, permutation)]
    glow.data_init(torch, params, x)
    for steps in params:  # couplings away from the identity: every term of the gradient in play
        for step in steps:
            for key in ("W3", "b3", "logs3"):
                step[key] = step[key] + 0.1 * torch.randn(step[key].shape, dtype=torch.float64)
    trainer = Trainer(torch, params)
    loss = trainer.loss_and_grad(x[:64])
    reference = [[{k: v.detach().clone() for k, v in step.items()} for step in steps] for steps in params]
    glow.trainables(reference)
    z, logdet = glow.train_forward(torch, reference, x[:64])
    expected = (0.5 * (z * z).sum(dim=1) + 0.5 * 7 * np.log(2 * np.pi) - logdet).mean() / 7
    expected.backward()
    assert float(loss) == pytest.approx(float(expected.detach()), abs=1e-12)
    stored, grads = trainer.levels(), trainer.levels(trainer.grad)
    for steps, ref_steps, stored_steps, grad_steps in zip(params, reference, stored, grads, strict=True):
        for step, ref, kept, grad in zip(steps, ref_steps, stored_steps, grad_steps, strict=True):
            trained = {k for k, v in ref.items() if v.grad is not None}
            assert trained == set(step) - {"P", "src", "sign"}
            for key in trained:
                assert torch.equal(kept[key], step[key]), key  # the stored order is undone exactly
                np.testing.assert_allclose(grad[key].numpy(), ref[key].grad.numpy(), rtol=1e-9, atol=1e-12,
                                           err_msg=key)


def test_glow_training_raises_the_likelihood(glow16: Flow) -> None:
    X = correlated()
    assert glow16.log_likelihood(X) > Flow()._fit(X, steps=0).log_likelihood(X) + 1.0
    assert glow16.history_[-10:].mean() < glow16.history_[:10].mean()


def test_glow_needs_varying_dimensions_for_every_level() -> None:
    X = correlated(n=200, d=8)
    X[:, 4:] = 1.0  # four dead coordinates: 4 vary, a 3-level Glow needs 5
    with pytest.raises(MethodError, match=r"'flow': only 4 of 8 dimensions vary in the fit corpus; flow needs at least "
                       r"5 \(3 levels halve the coordinates 2 times"):
        Flow().fit(X)
    assert Flow(levels=2, steps=2).fit(X).constant_dims_ == (4, 5, 6, 7)  # 2 levels need 3


def test_affine_flow_is_still_available() -> None:
    X = correlated()
    method, _ = make_method("flow-arch=affine")
    assert (method.n_blocks, method.hidden, method.spec) == (4, 128, "flow-arch=affine")
    method = make_method("flow-arch=affine-steps=5")[0].fit(X)
    assert len(method.blocks_) == 4 and method.blocks_[0]["W1"].shape == (8, 128)
    assert np.abs(method.inverse(method.transform(X)) - X).max() < 1e-8
