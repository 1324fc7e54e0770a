"""The neuron-level analysis of Luo, Kulmizev & Mao (ACL 2021): which dimensions of each layer's token
vectors are, almost always, the smallest or largest coordinate, how far their mean lies from the other
dimensions', and how their value changes with the token's position.

It streams over batches (every layer of every token is never held at once), and uses the same
detection as the ``clip`` method (:func:`iso_bench.outliers.detect_outliers`).

Example:
    >>> report = analyse(backbone, sentences, layers=None)           # doctest: +SKIP
    >>> report.layers[-1].outliers                                   # doctest: +SKIP
    [308, 381]
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench.outliers import OutlierStats, detect_outliers, stats_from_moments

MAX_POSITION = 64  # positions beyond this are pooled into the last bucket of the position profile


@dataclass
class LayerReport:
    """The analysis of one hidden-state layer (0 = embeddings)."""

    layer: int
    stats: OutlierStats
    outliers: list[int]
    position_mean: np.ndarray  # (MAX_POSITION, dim): mean value per token position (1 = first real token)
    position_count: np.ndarray  # (MAX_POSITION,)

    def position_correlation(self, dim: int) -> float:
        """Pearson correlation between token position and the dimension's mean value at that position."""
        have = self.position_count > 0
        pos = np.arange(1, MAX_POSITION + 1)[have]
        values = self.position_mean[have, dim]
        if len(pos) < 3 or values.std() == 0:
            return float("nan")
        return float(np.corrcoef(pos, values)[0, 1])

    def top(self, k: int) -> list[dict[str, Any]]:
        rows = []
        for j in self.stats.top(k):
            rows.append({
                "dim": j,
                "argmin_fraction": float(self.stats.argmin_fraction[j]),
                "argmax_fraction": float(self.stats.argmax_fraction[j]),
                "mean": float(self.stats.mean[j]),
                "mean_z": float(self.stats.mean_z[j]),
                "position_correlation": _finite_or_none(self.position_correlation(j)),
                "outlier": j in self.outliers,
            })
        return rows


@dataclass
class OutlierReport:
    model: str
    revision: str
    corpus: str
    n_texts: int
    n_tokens: int
    layers: list[LayerReport] = field(default_factory=list)

    def to_dict(self, top: int = 10) -> dict[str, Any]:
        return {
            "model": self.model, "revision": self.revision, "corpus": self.corpus,
            "n_texts": self.n_texts, "n_tokens": self.n_tokens,
            "detection": "fraction as argmin/argmax >= max(10/d, 0.05) (capped at 0.5) and |mean z| >= 3",
            "layers": [{"layer": r.layer, "outliers": r.outliers, "top": r.top(top),
                        "position_profile": {str(j): _rounded(r.position_mean[r.position_count > 0, j])
                                             for j in r.outliers}} for r in self.layers],
        }


def _finite_or_none(value: float) -> float | None:
    return value if np.isfinite(value) else None


def _rounded(values: np.ndarray) -> list[float]:
    return [round(float(v), 4) for v in values]


def analyse(backbone: Any, texts: Sequence[str], layers: Sequence[int] | None = None, *, batch_size: int = 32,
            progress: bool = True, corpus: str = "") -> OutlierReport:
    """Accumulate per-layer statistics of every real token vector of ``texts``; see the module doc."""
    n_states = backbone.model.config.num_hidden_layers + 1
    wanted = list(range(n_states)) if layers is None else [lay % n_states for lay in layers]
    for lay in layers or []:
        if not -n_states <= lay < n_states:
            raise ValueError(f"layer {lay} does not exist: the model has hidden states 0..{n_states - 1}")
    d = backbone.dim
    acc = {lay: {"n": 0, "argmin": np.zeros(d, np.int64), "argmax": np.zeros(d, np.int64),
                 "sum": np.zeros(d), "sumsq": np.zeros(d),
                 "pos_sum": np.zeros((MAX_POSITION, d)), "pos_n": np.zeros(MAX_POSITION, np.int64)} for lay in wanted}
    for states, real in backbone.iter_hidden_states(texts, batch_size=batch_size, progress=progress,
                                                    desc="outlier analysis"):
        position = np.minimum(np.cumsum(real, axis=1), MAX_POSITION)[real] - 1  # 0-based bucket per real token
        for lay in wanted:
            X = states[lay][real].astype(np.float64)
            a = acc[lay]
            a["n"] += len(X)
            a["argmin"] += np.bincount(X.argmin(axis=1), minlength=d)
            a["argmax"] += np.bincount(X.argmax(axis=1), minlength=d)
            a["sum"] += X.sum(0)
            a["sumsq"] += (X * X).sum(0)
            np.add.at(a["pos_sum"], position, X)
            a["pos_n"] += np.bincount(position, minlength=MAX_POSITION)
    report = OutlierReport(backbone.model_id, str(backbone.revision), corpus, len(texts), acc[wanted[0]]["n"])
    if report.n_tokens == 0:
        raise ValueError("the corpus has no tokens to analyse")
    for lay in wanted:
        a = acc[lay]
        mean = a["sum"] / a["n"]
        std = np.sqrt(np.maximum(a["sumsq"] / a["n"] - mean * mean, 0.0))
        stats = stats_from_moments(a["n"], a["argmin"], a["argmax"], mean, std)
        pos_mean = a["pos_sum"] / np.maximum(a["pos_n"], 1)[:, None]
        report.layers.append(LayerReport(lay, stats, detect_outliers(stats), pos_mean, a["pos_n"]))
    return report


def render_markdown(report: OutlierReport, top: int = 5, png_name: str | None = None) -> str:
    """A markdown report: per layer, the detected outliers and the top dimensions with their statistics."""
    from tabulate import tabulate

    lines = [f"# Outlier dimensions of {report.model}", "",
             f"Revision `{report.revision}`; corpus: {report.corpus} ({report.n_texts:,} texts, "
             f"{report.n_tokens:,} token vectors, special tokens excluded).", "",
             "A dimension is an outlier when it is the smallest or largest coordinate of at least max(10/d, 5%) "
             "of the token vectors and its mean lies at least 3 standard deviations (of the other dimensions' "
             "means) from the others; `clip` uses the same rule. *pos. corr.* is the Pearson correlation between "
             "token position and the dimension's mean value at that position.", ""]
    if png_name:
        lines += [f"![extreme-value fraction per layer]({png_name})", ""]
    summary = [[r.layer, ", ".join(map(str, r.outliers)) or "none"] for r in report.layers]
    lines += [tabulate(summary, headers=["layer", "outlier dimensions"], tablefmt="github", disable_numparse=True), ""]
    for r in report.layers:
        rows = [[t["dim"], f"{t['argmin_fraction']:.3f}", f"{t['argmax_fraction']:.3f}", f"{t['mean']:.3f}",
                 f"{t['mean_z']:.1f}", "–" if t["position_correlation"] is None else f"{t['position_correlation']:.2f}",
                 "yes" if t["outlier"] else ""] for t in r.top(top)]
        lines += [f"## Layer {r.layer}", "",
                  tabulate(rows, headers=["dim", "argmin frac.", "argmax frac.", "mean", "mean z", "pos. corr.",
                                          "outlier"], tablefmt="github", disable_numparse=True), ""]
    return "\n".join(lines)


def plot(report: OutlierReport, path: Path, top: int = 5) -> None:
    """Heatmap PNG: layers by the union of each layer's top dimensions, coloured by extreme-value fraction."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims = sorted({j for r in report.layers for j in r.stats.top(top)})
    grid = np.array([[r.stats.fraction[j] for j in dims] for r in report.layers])
    fig, ax = plt.subplots(figsize=(max(6, 0.35 * len(dims) + 2), 0.4 * len(report.layers) + 1.5), dpi=100)
    image = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1)
    ax.set_xticks(range(len(dims)), [str(j) for j in dims], rotation=90, fontsize=7)
    ax.set_yticks(range(len(report.layers)), [str(r.layer) for r in report.layers], fontsize=7)
    ax.set_xlabel("dimension")
    ax.set_ylabel("layer (0 = embeddings)")
    ax.set_title(f"{report.model}\nfraction of token vectors in which the dimension is the min or the max",
                 fontsize=8)
    fig.colorbar(image, ax=ax)
    fig.tight_layout()
    fig.savefig(path, metadata={"Software": None})
    plt.close(fig)


def write_reports(report: OutlierReport, folder: Path, top: int = 5) -> list[Path]:
    """Write ``<model>-outliers.{json,md,png}`` into ``folder``; returns their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = report.model.replace("/", "__") + "-outliers"
    png, md, js = folder / f"{stem}.png", folder / f"{stem}.md", folder / f"{stem}.json"
    plot(report, png, top)
    md.write_text(render_markdown(report, top, png.name) + "\n")
    js.write_text(json.dumps(report.to_dict(max(top, 10)), indent=2, sort_keys=True, allow_nan=False,
                             default=_json_default) + "\n")
    return [md, js, png]


def _json_default(value: Any) -> Any:
    raise TypeError(f"not JSON serialisable: {value!r}")
