"""The streaming neuron-level analysis equals the direct computation, finds planted outliers, and is reported."""

from __future__ import annotations

import json
import types

import numpy as np
import pytest
import torch

from iso_bench.numerics.outliers import analyse, outlier_stats
from iso_bench.report import write_outlier_reports

TEXTS = ["the cat sat on the mat", "a dog", "the man is playing the guitar , the woman plays piano !", "a girl"]


def test_streaming_statistics_equal_the_direct_ones(tiny_backbone) -> None:
    report = analyse(tiny_backbone, TEXTS, batch_size=3, progress=False, corpus="test")
    per_layer = {lay: [] for lay in range(4)}
    first_tokens = {lay: [] for lay in range(4)}
    for text in TEXTS:
        enc = tiny_backbone.tokenizer(text, return_tensors="pt")
        with torch.no_grad():
            states = tiny_backbone.model(**enc, output_hidden_states=True).hidden_states
        for lay in range(4):
            per_layer[lay].append(states[lay][0, 1:-1].numpy())  # real tokens: drop [CLS] and [SEP]
            first_tokens[lay].append(states[lay][0, 1].numpy())
    assert [r.layer for r in report.layers] == [0, 1, 2, 3]
    assert report.n_tokens == sum(len(t) for t in per_layer[0])
    for r in report.layers:
        direct = outlier_stats(np.concatenate(per_layer[r.layer]))
        np.testing.assert_allclose(r.stats.argmin_fraction, direct.argmin_fraction)
        np.testing.assert_allclose(r.stats.argmax_fraction, direct.argmax_fraction)
        np.testing.assert_allclose(r.stats.mean, direct.mean, atol=1e-6)
        np.testing.assert_allclose(r.stats.std, direct.std, atol=1e-5)
        np.testing.assert_allclose(r.position_mean[0], np.mean(first_tokens[r.layer], axis=0), atol=1e-6)
    assert [r.layer for r in analyse(tiny_backbone, TEXTS, [-1], progress=False).layers] == [3]
    with pytest.raises(ValueError, match="layer 7 does not exist"):
        analyse(tiny_backbone, TEXTS, [7], progress=False)


class PlantedBackbone:
    """Token vectors of dim 16 where dimension 5 is always the smallest and grows more negative with position."""

    model_id, revision, dim = "test/planted", "r0", 16
    model = types.SimpleNamespace(config=types.SimpleNamespace(num_hidden_layers=1))

    def iter_hidden_states(self, texts, *, batch_size, progress, desc):
        rng = np.random.default_rng(0)
        for _ in range(0, len(texts), batch_size):
            states = rng.normal(size=(2, batch_size, 10, self.dim)).astype(np.float32)
            states[1, :, :, 5] = -8.0 - np.arange(10)  # layer 1 only
            real = np.ones((batch_size, 10), bool)
            real[:, 8:] = False  # padding
            yield states, real


def test_planted_outlier_is_found_with_its_position_trend(tmp_path) -> None:
    report = analyse(PlantedBackbone(), ["x"] * 40, batch_size=8, progress=False, corpus="planted")
    layer0, layer1 = report.layers
    assert layer0.outliers == [] and layer1.outliers == [5]
    assert layer1.stats.argmin_fraction[5] == 1.0
    assert layer1.position_correlation(5) == pytest.approx(-1.0)
    assert layer1.position_count[:8].tolist() == [40] * 8 and layer1.position_count[8:].sum() == 0
    md, js, png = write_outlier_reports(report, tmp_path)
    data = json.loads(js.read_text())
    assert data["layers"][1]["outliers"] == [5] and data["layers"][1]["top"][0]["dim"] == 5
    assert "| 1       | 5                    |" in md.read_text() and png.read_bytes()[:4] == b"\x89PNG"
