"""flow (BERT-flow): training raises the likelihood, inverts, maps a Gaussian to a standard normal, trains
on one thread, keeps the global RNG and the caller's thread count, refuses bad parameters."""

from __future__ import annotations

import numpy as np
import pytest

from iso_bench.methods import MethodError
from iso_bench.methods.flow import Flow


# ---- flow -----------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def gaussian() -> np.ndarray:
    """2000 draws of an 8-d Gaussian with a random covariance and offset."""
    rng = np.random.default_rng(0)
    return rng.normal(size=(2000, 8)) @ rng.normal(size=(8, 8)) + 3.0 * rng.normal(size=8)


@pytest.fixture(scope="module", params=["glow", "affine"])
def trained(gaussian: np.ndarray, request: pytest.FixtureRequest) -> Flow:
    # both architectures; 300 steps of large batches (less gradient noise, about 38 epochs) for the
    # capability checks below; the default (one epoch of 64-vector batches, as BERT-flow trains) is
    # tested on its own
    return Flow(arch=request.param, batch_size=256, steps=300).fit(gaussian)


def test_flow_training_raises_the_likelihood(gaussian: np.ndarray, trained: Flow) -> None:
    before = Flow(arch=trained.arch)._fit(gaussian, steps=0).log_likelihood(gaussian)  # data-dependent init only
    after = trained.log_likelihood(gaussian)
    # the Gaussian MLE bounds what a linear map can reach; the flow should get there (within 0.1 nat;
    # observed: about 0.1 nat above it, both architectures, fitting the sample's own departures)
    Xc = gaussian - gaussian.mean(axis=0)
    _, logdet = np.linalg.slogdet(Xc.T @ Xc / len(Xc))
    gauss_mle = -0.5 * 8 * (1 + np.log(2 * np.pi)) - 0.5 * logdet
    assert after > before + 1.0
    assert after > gauss_mle - 0.1
    assert trained.history_[-20:].mean() < trained.history_[:20].mean()


def test_flow_inverts(gaussian: np.ndarray, trained: Flow) -> None:
    assert np.abs(trained.inverse(trained.transform(gaussian)) - gaussian).max() < 1e-4
    z = np.random.default_rng(5).normal(size=(10, 8))
    assert np.abs(trained.transform(trained.inverse(z)) - z).max() < 1e-4


def test_flow_maps_gaussian_data_to_a_standard_normal(gaussian: np.ndarray, trained: Flow) -> None:
    z = trained.transform(gaussian)
    # observed: |mean| <= 0.015, |cov - I| <= 0.035 (untrained init: |cov - I| about 0.8); the bounds
    # leave room for platform differences, not for a flow that fails to decorrelate
    assert np.abs(z.mean(axis=0)).max() < 0.05
    assert np.abs(np.cov(z, rowvar=False) - np.eye(8)).max() < 0.08
    untrained = Flow(arch=trained.arch)._fit(gaussian, steps=0).transform(gaussian)
    assert np.abs(np.cov(untrained, rowvar=False) - np.eye(8)).max() > 0.5


def test_flow_trains_one_epoch_by_default_at_most_max_steps(gaussian: np.ndarray) -> None:
    # 2,000 vectors in batches of 64: ceil(2000 / 64) = 32 steps, one epoch
    flow = Flow().fit(gaussian)
    assert flow.n_steps_ == 32 and len(flow.history_) == 32
    assert Flow(max_steps=10).fit(gaussian).n_steps_ == 10
    assert Flow(steps=7, max_steps=3).fit(gaussian).n_steps_ == 7  # an explicit count is not capped
    assert flow.log_likelihood(gaussian) > Flow()._fit(gaussian, steps=0).log_likelihood(gaussian)


def test_flow_leaves_the_global_torch_rng_alone(gaussian: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    state = torch.get_rng_state()
    Flow(steps=3).fit(gaussian)
    assert torch.equal(state, torch.get_rng_state())
    assert not np.array_equal(
        Flow(steps=3, seed=1).fit(gaussian).transform(gaussian), Flow(steps=3, seed=2).fit(gaussian).transform(gaussian)
    )


@pytest.mark.parametrize("arch", ["glow", "affine"])
def test_flow_trains_on_one_thread_and_restores_the_callers_count(
    gaussian: np.ndarray, arch: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    torch = pytest.importorskip("torch")
    import iso_bench.methods.flow as flow_module

    seen = []

    def spy(torch, *args):
        seen.append(torch.get_num_threads())
        if len(seen) == 2:
            raise RuntimeError("training failed")
        return train(torch, *args)

    train = flow_module._train
    monkeypatch.setattr(flow_module, "_train", spy)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(3)
        Flow(arch=arch, steps=2).fit(gaussian)
        assert torch.get_num_threads() == 3
        with pytest.raises(RuntimeError, match="training failed"):
            Flow(arch=arch, steps=2).fit(gaussian)
        assert torch.get_num_threads() == 3 and seen == [1, 1]
    finally:
        torch.set_num_threads(before)


def test_flow_device_is_no_parameter(gaussian: np.ndarray) -> None:
    torch = pytest.importorskip("torch")
    default = Flow(steps=5).fit(gaussian).transform(gaussian)
    method = Flow(steps=5)
    method.device = "cpu"
    assert method.spec == "flow-steps=5" and "device" not in method.get_params()
    np.testing.assert_array_equal(method.fit(gaussian).transform(gaussian), default)
    method.device = "cuda"  # where there is no GPU, training runs on the CPU
    Z = method.fit(gaussian).transform(gaussian)
    if torch.cuda.is_available():  # the same training, rounded differently
        np.testing.assert_allclose(Z, default, atol=1e-3)
        assert np.abs(method.inverse(Z) - gaussian).max() < 1e-8
    else:
        np.testing.assert_array_equal(Z, default)


def test_flow_errors(gaussian: np.ndarray) -> None:
    with pytest.raises(MethodError, match=r"'flow'.*more vectors than dimensions"):
        Flow().fit(gaussian[:8])
    with pytest.raises(MethodError, match=r"needs dim >= 5 \(3 levels halve"):
        Flow().fit(gaussian[:, :4])
    with pytest.raises(MethodError, match=r"needs dim >= 2 \(the coupling splits the coordinates in two\)"):
        Flow(arch="affine").fit(gaussian[:, :1])
    one_varies = np.ones_like(gaussian)
    one_varies[:, 0] = gaussian[:, 0]
    for arch, need in (("glow", 5), ("affine", 2)):
        with pytest.raises(MethodError, match=f"only 1 of 8 dimensions vary in the fit corpus; .* at least {need} "):
            Flow(arch=arch).fit(one_varies)


def test_flow_models_the_varying_dimensions_and_zeroes_constant_ones(gaussian: np.ndarray) -> None:
    constant = gaussian.copy()
    constant[:, 2] = 1.0  # a dead coordinate, as all-MiniLM-L6-v2 has
    flow = Flow(steps=30).fit(constant)
    Z = flow.transform(constant)
    assert flow.constant_dims_ == (2,) and np.all(Z[:, 2] == 0)
    assert np.abs(flow.inverse(Z) - constant).max() < 1e-8
    rest = Flow(steps=30).fit(np.delete(constant, 2, axis=1)).transform(np.delete(constant, 2, axis=1))
    np.testing.assert_allclose(np.delete(Z, 2, axis=1), rest, atol=1e-10)
