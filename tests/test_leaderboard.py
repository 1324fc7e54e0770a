"""The reporter: aggregation of a hand-written results folder, each renderer's exact output, the run summary."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

from iso_bench.registry import IsoBenchError
from iso_bench.report import (
    FORMATS,
    LeaderboardError,
    build_leaderboard,
    format_summary,
    markdown_table,
    plot_data,
    read_results,
    render_csv,
    render_latex,
    render_markdown,
    split_model_name,
    summary_header,
    write_leaderboard,
    write_plots,
)
from iso_bench.report.board import place
from iso_bench.report.tables import format_delta

REV = "0123456789abcdef0123456789abcdef01234567"
ENV = {"device": "cuda", "hardware": "NVIDIA H100", "python": "3.11.7", "torch": "2.13.0", "transformers": "5.23.0",
       "mteb": "2.26.24", "platform": "Linux-6.8"}
DATA = {"STS12": ("mteb/sts12-sts", "a0d5"), "STSBenchmark": ("mteb/stsbenchmark-sts", "b0fd"),
        "Isotropy-STSB": ("mteb/stsbenchmark-sts", "b0fd")}
CMD_A = "iso-bench run --model org/alpha --methods raw abtt --tasks STS12 STSBenchmark Isotropy-STSB"
CMD_W = "iso-bench run --model org/alpha --methods whiten --tasks STS12 STSBenchmark Isotropy-STSB"


def record(base: str, variant: str, task: str, *, command: str | None, env: dict | None,
           fits: list | None = None) -> dict:
    """The iso_bench block of a result entry, as the runner writes it (environment/command optional: older files)."""
    repo, rev = DATA.get(task, ("mteb/other", "c0de"))
    fitted = variant != "raw"
    rec = {
        "iso_bench_version": "0.1.0", "model": base, "revision": REV,
        "extraction": {"pooling": "mean", "layer": -1, "normalize": True, "max_length": 256},
        "variant": {"method": variant, "params": {"n_components": None} if fitted else {}, "level": "sentence",
                    "fit_corpus": "task", "seed": 0},
        "data": {"repo": repo, "revision": rev, "source": "mirror", "path": f"/home/someone/hub/{repo}",
                 "sha256": rev * 16},
        "fit": ({"fit_corpus": "task", "task": task, "splits": ["test"], "n_texts": 10, "texts_sha256": "ff", "seed": 0,
                 "fits": fits or []} if fitted else {"fit_corpus": None}),
    }
    if env is not None:
        rec["environment"] = env
    if command is not None:
        rec["command"] = command
    return rec


def write_result(root: Path, base: str, variant: str, task: str, main: float, *, metrics: dict | None = None,
                 command: str | None = CMD_A, env: dict | None = ENV, date: float | str = 1795313600.0,
                 meta: bool = True, fits: list | None = None) -> Path:
    """One mteb TaskResult file (and the model's model_meta.json) under ``root/results/``."""
    folder = root / "results" / f"{base}+{variant}".replace("/", "__") / REV
    folder.mkdir(parents=True, exist_ok=True)
    if meta:
        (folder / "model_meta.json").write_text(json.dumps({"name": f"{base}+{variant}", "revision": REV}))
    entry = {**(metrics or {}), "main_score": main, "hf_subset": "default", "languages": ["eng-Latn"],
             "iso_bench": record(base, variant, task, command=command, env=env, fits=fits)}
    path = folder / f"{task}.json"
    path.write_text(json.dumps({"dataset_revision": DATA.get(task, ("", "c0de"))[1], "task_name": task,
                                "mteb_version": "2.26.24", "scores": {"test": [entry]}, "evaluation_time": 1.0,
                                "date": date}, indent=2))
    return path


def small_case(root: Path, reverse: bool = False) -> Path:
    """org/alpha: raw, whiten and abtt on STS12, STSBenchmark and Isotropy-STSB.

    Hand-checked: raw 72.37 / 82.03, mean 77.20; whiten 65.47 (−6.90) / 79.93 (−2.10), mean 72.70 (−4.50);
    abtt ties raw on STS12 (both bold) and has no STSBenchmark result, so its mean is –, not 72.37.
    abtt's files are older (no environment, no command); whiten was run by another command on another day.
    """
    writes = [
        lambda: write_result(root, "org/alpha", "raw", "STS12", 0.7237),
        lambda: write_result(root, "org/alpha", "raw", "STSBenchmark", 0.8203),
        lambda: write_result(root, "org/alpha", "raw", "Isotropy-STSB", 0.766573,
                             metrics={"sentence_iw": 0.766573, "sentence_isoscore": 0.277153}),
        lambda: write_result(root, "org/alpha", "whiten", "STS12", 0.6547, command=CMD_W, date="2026-11-23T10:00:00"),
        lambda: write_result(root, "org/alpha", "whiten", "STSBenchmark", 0.7993, command=CMD_W),
        lambda: write_result(root, "org/alpha", "whiten", "Isotropy-STSB", 0.865,
                             metrics={"sentence_iw": 0.865, "sentence_isoscore": 1.0}, command=CMD_W),
        lambda: write_result(root, "org/alpha", "abtt", "STS12", 0.7237, command=None, env=None),
    ]
    for write in reversed(writes) if reverse else writes:
        write()
    return root


PROVENANCE_STS = """\
Provenance:

- iso-bench: 0.1.0
- mteb: 2.26.24
- model: org/alpha @ 0123456789abcdef0123456789abcdef01234567
- extraction: layer=-1, max_length=256, normalize=true, pooling=mean
- data:
  - STS12: mteb/sts12-sts @ a0d5 (mirror, sha256 a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5)
  - STSBenchmark: mteb/stsbenchmark-sts @ b0fd (mirror, sha256 b0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fd)
- fit:
  - abtt (n_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0
  - raw: nothing fitted
  - whiten (n_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0
- date: 2026-11-22 to 2026-11-23
- hardware:
  - NVIDIA H100 (cuda)
  - not recorded in 1 of 5 result files
- software:
  - platform=Linux-6.8, python=3.11.7, torch=2.13.0, transformers=5.23.0
  - not recorded in 1 of 5 result files
- command:
  - `iso-bench run --model org/alpha --methods raw abtt --tasks STS12 STSBenchmark Isotropy-STSB`
  - `iso-bench run --model org/alpha --methods whiten --tasks STS12 STSBenchmark Isotropy-STSB`
  - not recorded in 1 of 5 result files
"""  # noqa: E501

EXPECTED_MARKDOWN = """\
# iso-bench leaderboard

Built from 7 result files. Every table is followed by the provenance of its numbers; – is a missing result, never \
averaged.

## org/alpha

revision 0123456789abcdef0123456789abcdef01234567

### MTEB STS: main score × 100 (cosine Spearman)

| variant   |             STS12 |   STSBenchmark |   mean MTEB-STS (2 tasks, cosine Spearman) |
|:----------|------------------:|---------------:|-------------------------------------------:|
| raw       |         **72.37** |      **82.03** |                                  **77.20** |
| abtt      | **72.37 (±0.00)** |              – |                                          – |
| whiten    |     65.47 (−6.90) |  79.93 (−2.10) |                              72.70 (−4.50) |

- Main score × 100 (cosine Spearman), two decimals; (+d) / (−d) = difference from raw, computed from the rounded \
values; bold = best in its column (ties: all bold).
- mean MTEB-STS (2 tasks, cosine Spearman) = unweighted mean of STS12, STSBenchmark; a variant missing any of them \
gets – (never a mean of the present cells).
- Missing (–): abtt on STSBenchmark: no result file, or a non-finite score.

""" + PROVENANCE_STS + """
### isotropy diagnostics: Isotropy-STSB

| variant   |   sentence I(W) |   sentence IsoScore |
|:----------|----------------:|--------------------:|
| raw       |          0.7666 |              0.2772 |
| abtt      |               – |                   – |
| whiten    |               – |    1.0000 (+0.7228) |

- Diagnostics of the vectors on Isotropy-STSB, as fractions; (+d) / (−d) = difference from raw. Not ranked and never \
averaged: more isotropy is not better by itself. I(W): Mu & Viswanath 2018 (1 = isotropic); IsoScore: Rudman et al. \
2022; avg. cosine: mean cosine of all pairs.
- I(W) of whitened vectors (whiten) is not shown (–, not a missing result): I(W) takes its directions from the \
eigenvectors of WᵀW; after whitening those eigenvalues are (nearly) equal, any basis qualifies and I(W) moves with \
rounding noise (a rerun of the same fit can move it by more than 0.5). For whitened rows read IsoScore.
- Missing (–): abtt on Isotropy-STSB: no result file, or a non-finite score.

Provenance:

- iso-bench: 0.1.0
- mteb: 2.26.24
- model: org/alpha @ 0123456789abcdef0123456789abcdef01234567
- extraction: layer=-1, max_length=256, normalize=true, pooling=mean
- data: Isotropy-STSB: mteb/stsbenchmark-sts @ b0fd (mirror, sha256 \
b0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fd)
- fit:
  - raw: nothing fitted
  - whiten (n_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0
- date: 2026-11-22
- hardware: NVIDIA H100 (cuda)
- software: platform=Linux-6.8, python=3.11.7, torch=2.13.0, transformers=5.23.0
- command:
  - `iso-bench run --model org/alpha --methods raw abtt --tasks STS12 STSBenchmark Isotropy-STSB`
  - `iso-bench run --model org/alpha --methods whiten --tasks STS12 STSBenchmark Isotropy-STSB`

## Models compared

### best variant of each model by mean MTEB-STS (2 tasks, cosine Spearman)

| model     | revision     | variant    |   mean MTEB-STS (2 tasks, cosine Spearman) |
|:----------|:-------------|:-----------|-------------------------------------------:|
| org/alpha | 0123456789ab | raw (best) |                                  **77.20** |

- best = the variant with the highest mean MTEB-STS (2 tasks, cosine Spearman), among the variants with a result on \
every one of its tasks (compared at two decimals; ties: all listed); each model's raw row is shown with it.
- Other columns show the same variants (not each column's best); (+d) / (−d) = difference from the model's raw; bold \
= best in the column over all rows; – = missing, never averaged.

""" + PROVENANCE_STS


def test_markdown_exact(tmp_path: Path) -> None:
    board = build_leaderboard(read_results(small_case(tmp_path)))
    assert render_markdown(board) == EXPECTED_MARKDOWN


EXPECTED_CSV = """\
table,model,revision,variant,tag,column,value,delta_vs_raw,best
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,STS12,72.37,,1
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,STSBenchmark,82.03,,1
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,"mean MTEB-STS (2 tasks, cosine Spearman)",77.20,,1
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,STS12,72.37,0.00,1
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,STSBenchmark,,,0
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,"mean MTEB-STS (2 tasks, cosine Spearman)",,,0
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,STS12,65.47,-6.90,0
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,STSBenchmark,79.93,-2.10,0
MTEB STS: main score × 100 (cosine Spearman),org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,"mean MTEB-STS (2 tasks, cosine Spearman)",72.70,-4.50,0
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,sentence I(W),0.7666,,0
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,raw,,sentence IsoScore,0.2772,,0
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,sentence I(W),,,0
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,abtt,,sentence IsoScore,,,0
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,sentence I(W),,,0
isotropy diagnostics: Isotropy-STSB,org/alpha,0123456789abcdef0123456789abcdef01234567,whiten,,sentence IsoScore,1.0000,+0.7228,0
"best variant of each model by mean MTEB-STS (2 tasks, cosine Spearman)",org/alpha,0123456789abcdef0123456789abcdef01234567,raw,best,"mean MTEB-STS (2 tasks, cosine Spearman)",77.20,,1
"""  # noqa: E501

EXPECTED_LATEX = r"""% iso-bench leaderboard; needs \usepackage{booktabs}

\begin{table}[ht]
\centering
\small
\caption{org/alpha: MTEB STS: main score $\times$ 100 (cosine Spearman)}
\begin{tabular}{lrrr}
\toprule
 variant   &                      STS12 &    STSBenchmark &   mean MTEB-STS (2 tasks, cosine Spearman) \\
\midrule
 raw       &             \textbf{72.37} &  \textbf{82.03} &                             \textbf{77.20} \\
 abtt      & \textbf{72.37 ($\pm$0.00)} &              -- &                                         -- \\
 whiten    &            65.47 ($-$6.90) & 79.93 ($-$2.10) &                            72.70 ($-$4.50) \\
\bottomrule
\end{tabular}

\smallskip
\footnotesize\raggedright
Main score $\times$ 100 (cosine Spearman), two decimals; (+d) / ($-$d) = difference from raw, computed from the rounded values; bold = best in its column (ties: all bold).\\
mean MTEB-STS (2 tasks, cosine Spearman) = unweighted mean of STS12, STSBenchmark; a variant missing any of them gets -- (never a mean of the present cells).\\
Missing (--): abtt on STSBenchmark: no result file, or a non-finite score.\\
\textit{iso-bench}: 0.1.0\\
\textit{mteb}: 2.26.24\\
\textit{model}: org/alpha @ 0123456789abcdef0123456789abcdef01234567\\
\textit{extraction}: layer=-1, max\_length=256, normalize=true, pooling=mean\\
\textit{data}: STS12: mteb/sts12-sts @ a0d5 (mirror, sha256 a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5); STSBenchmark: mteb/stsbenchmark-sts @ b0fd (mirror, sha256 b0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fd)\\
\textit{fit}: abtt (n\_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0; raw: nothing fitted; whiten (n\_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0\\
\textit{date}: 2026-11-22 to 2026-11-23\\
\textit{hardware}: NVIDIA H100 (cuda); not recorded in 1 of 5 result files\\
\textit{software}: platform=Linux-6.8, python=3.11.7, torch=2.13.0, transformers=5.23.0; not recorded in 1 of 5 result files\\
\textit{command}: \texttt{iso-bench run -{}-model org/alpha -{}-methods raw abtt -{}-tasks STS12 STSBenchmark Isotropy-STSB}; \texttt{iso-bench run -{}-model org/alpha -{}-methods whiten -{}-tasks STS12 STSBenchmark Isotropy-STSB}; not recorded in 1 of 5 result files\\
\end{table}

\begin{table}[ht]
\centering
\small
\caption{org/alpha: isotropy diagnostics: Isotropy-STSB}
\begin{tabular}{lrr}
\toprule
 variant   &   sentence I(W) &   sentence IsoScore \\
\midrule
 raw       &          0.7666 &              0.2772 \\
 abtt      &              -- &                  -- \\
 whiten    &              -- &    1.0000 (+0.7228) \\
\bottomrule
\end{tabular}

\smallskip
\footnotesize\raggedright
Diagnostics of the vectors on Isotropy-STSB, as fractions; (+d) / ($-$d) = difference from raw. Not ranked and never averaged: more isotropy is not better by itself. I(W): Mu \& Viswanath 2018 (1 = isotropic); IsoScore: Rudman et al. 2022; avg. cosine: mean cosine of all pairs.\\
I(W) of whitened vectors (whiten) is not shown (--, not a missing result): I(W) takes its directions from the eigenvectors of W$^\top$W; after whitening those eigenvalues are (nearly) equal, any basis qualifies and I(W) moves with rounding noise (a rerun of the same fit can move it by more than 0.5). For whitened rows read IsoScore.\\
Missing (--): abtt on Isotropy-STSB: no result file, or a non-finite score.\\
\textit{iso-bench}: 0.1.0\\
\textit{mteb}: 2.26.24\\
\textit{model}: org/alpha @ 0123456789abcdef0123456789abcdef01234567\\
\textit{extraction}: layer=-1, max\_length=256, normalize=true, pooling=mean\\
\textit{data}: Isotropy-STSB: mteb/stsbenchmark-sts @ b0fd (mirror, sha256 b0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fd)\\
\textit{fit}: raw: nothing fitted; whiten (n\_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0\\
\textit{date}: 2026-11-22\\
\textit{hardware}: NVIDIA H100 (cuda)\\
\textit{software}: platform=Linux-6.8, python=3.11.7, torch=2.13.0, transformers=5.23.0\\
\textit{command}: \texttt{iso-bench run -{}-model org/alpha -{}-methods raw abtt -{}-tasks STS12 STSBenchmark Isotropy-STSB}; \texttt{iso-bench run -{}-model org/alpha -{}-methods whiten -{}-tasks STS12 STSBenchmark Isotropy-STSB}\\
\end{table}

\begin{table}[ht]
\centering
\small
\caption{Models compared: best variant of each model by mean MTEB-STS (2 tasks, cosine Spearman)}
\begin{tabular}{lllr}
\toprule
 model     & revision     & variant    &   mean MTEB-STS (2 tasks, cosine Spearman) \\
\midrule
 org/alpha & 0123456789ab & raw (best) &                             \textbf{77.20} \\
\bottomrule
\end{tabular}

\smallskip
\footnotesize\raggedright
best = the variant with the highest mean MTEB-STS (2 tasks, cosine Spearman), among the variants with a result on every one of its tasks (compared at two decimals; ties: all listed); each model's raw row is shown with it.\\
Other columns show the same variants (not each column's best); (+d) / ($-$d) = difference from the model's raw; bold = best in the column over all rows; -- = missing, never averaged.\\
\textit{iso-bench}: 0.1.0\\
\textit{mteb}: 2.26.24\\
\textit{model}: org/alpha @ 0123456789abcdef0123456789abcdef01234567\\
\textit{extraction}: layer=-1, max\_length=256, normalize=true, pooling=mean\\
\textit{data}: STS12: mteb/sts12-sts @ a0d5 (mirror, sha256 a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5a0d5); STSBenchmark: mteb/stsbenchmark-sts @ b0fd (mirror, sha256 b0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fdb0fd)\\
\textit{fit}: abtt (n\_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0; raw: nothing fitted; whiten (n\_components=null): fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0\\
\textit{date}: 2026-11-22 to 2026-11-23\\
\textit{hardware}: NVIDIA H100 (cuda); not recorded in 1 of 5 result files\\
\textit{software}: platform=Linux-6.8, python=3.11.7, torch=2.13.0, transformers=5.23.0; not recorded in 1 of 5 result files\\
\textit{command}: \texttt{iso-bench run -{}-model org/alpha -{}-methods raw abtt -{}-tasks STS12 STSBenchmark Isotropy-STSB}; \texttt{iso-bench run -{}-model org/alpha -{}-methods whiten -{}-tasks STS12 STSBenchmark Isotropy-STSB}; not recorded in 1 of 5 result files\\
\end{table}
"""  # noqa: E501


def test_csv_exact(tmp_path: Path) -> None:
    assert render_csv(build_leaderboard(read_results(small_case(tmp_path)))) == EXPECTED_CSV


def test_latex_exact(tmp_path: Path) -> None:
    assert render_latex(build_leaderboard(read_results(small_case(tmp_path)))) == EXPECTED_LATEX


def test_same_bytes_whatever_the_order_or_place(tmp_path: Path) -> None:
    """Two renders, files written in the opposite order, another folder: the same bytes in every format."""
    one = build_leaderboard(read_results(small_case(tmp_path / "a")))
    two = build_leaderboard(read_results(small_case(tmp_path / "somewhere" / "else", reverse=True)))
    shuffled = build_leaderboard(list(reversed(read_results(tmp_path / "a"))))
    for render in (render_markdown, render_csv, render_latex):
        assert render(one) == render(two) == render(shuffled) == render(one)


def test_missing_cell_never_enters_a_mean(tmp_path: Path) -> None:
    board = build_leaderboard(read_results(small_case(tmp_path)))
    sts = board.sections[0].tables[0]
    abtt = next(r for r in sts.rows if r.variant == "abtt")
    assert [c.value for c in abtt.cells] == [72.37, None, None]  # not 72.37, the mean of the present cell
    assert [c.best for c in sts.rows[0].cells] == [True, True, True] and abtt.cells[0].best  # a tie: both bold


def test_models_compared(tmp_path: Path) -> None:
    """A second model whose center beats its raw; ties on the criterion list every tied variant."""
    small_case(tmp_path)
    for variant, sts12, stsb in (("raw", 0.70, 0.80), ("center", 0.76, 0.83), ("clip", 0.80, 0.79)):
        write_result(tmp_path, "org/beta", variant, "STS12", sts12)
        write_result(tmp_path, "org/beta", variant, "STSBenchmark", stsb)
    write_result(tmp_path, "org/beta", "center", "WiC", 0.61)
    board = build_leaderboard(read_results(tmp_path))
    assert [s.title for s in board.sections] == ["org/alpha", "org/beta", "Models compared"]
    table = board.sections[-1].tables[0]
    assert markdown_table(table).split("\n\nProvenance:")[0] == """\
| model     | revision     | variant       |   mean MTEB-STS (2 tasks, cosine Spearman) |       WiC |
|:----------|:-------------|:--------------|-------------------------------------------:|----------:|
| org/alpha | 0123456789ab | raw (best)    |                                      77.20 |         – |
| org/beta  | 0123456789ab | raw           |                                      75.00 |         – |
| org/beta  | 0123456789ab | center (best) |                          **79.50 (+4.50)** | **61.00** |
| org/beta  | 0123456789ab | clip (best)   |                          **79.50 (+4.50)** |         – |

- best = the variant with the highest mean MTEB-STS (2 tasks, cosine Spearman), among the variants with a result on \
every one of its tasks (compared at two decimals; ties: all listed); each model's raw row is shown with it.
- Other columns show the same variants (not each column's best); (+d) / (−d) = difference from the model's raw; bold \
= best in the column over all rows; – = missing, never averaged."""


def test_provenance_block(tmp_path: Path) -> None:
    """Versions, model and revision, data revision and checksum (no local path), fits, date, hardware, commands."""
    board = build_leaderboard(read_results(small_case(tmp_path)))
    prov = dict(board.sections[0].tables[0].provenance)
    assert prov["model"] == ("org/alpha @ " + REV,)
    assert prov["data"][0].startswith("STS12: mteb/sts12-sts @ a0d5 (mirror, sha256 a0d5a0d5")
    assert not any("/home/someone" in line for values in prov.values() for line in values)
    assert prov["fit"][-1] == ("whiten (n_components=null): fit on the evaluated task's own texts (split test; "
                               "transductive), sentence level, seed 0")
    assert prov["date"] == ("2026-11-22 to 2026-11-23",)
    assert prov["command"] == (CMD_A, CMD_W, "not recorded in 1 of 5 result files")
    assert markdown_table(board.sections[0].tables[0]).endswith(PROVENANCE_STS)


def test_old_files_without_records_render(tmp_path: Path) -> None:
    """A plain mteb result (no iso_bench record, no model_meta.json, unknown task, NaN score) renders with –."""
    write_result(tmp_path, "org/alpha", "raw", "Banking77", 0.5, meta=False)
    path = write_result(tmp_path, "org/alpha", "whiten", "Banking77", float("nan"), meta=False)
    data = json.loads(path.read_text())
    del data["scores"]["test"][0]["iso_bench"]
    path.write_text(json.dumps(data))
    board = build_leaderboard(read_results(tmp_path))
    table = board.sections[0].tables[0]
    assert table.title == "other tasks: main score × 100 (main score)"
    assert [c.value for r in table.rows for c in r.cells] == [50.0, None]
    assert dict(table.provenance)["fit"] == ("raw: nothing fitted", "whiten: not recorded")
    assert "whiten on Banking77" in table.notes[-1]


@pytest.mark.parametrize(("content", "why"), [
    ("{not json", "not a readable JSON file"),
    ('{"task_name": "STS12"}', 'no "scores" object'),
    ('{"task_name": "STS12", "scores": {"test": [{"main_score": "high"}]}}', '"main_score" of split \'test\''),
    ('{"scores": {"test": [{"main_score": 0.5}]}}', 'no "task_name"'),
])
def test_malformed_file_names_the_file(tmp_path: Path, content: str, why: str) -> None:
    small_case(tmp_path)
    bad = write_result(tmp_path, "org/alpha", "raw", "STS13", 0.5)
    bad.write_text(content)
    with pytest.raises(LeaderboardError, match=why) as info:
        read_results(tmp_path)
    assert str(bad) in str(info.value)
    with pytest.raises(LeaderboardError, match=why) as info:
        write_leaderboard(tmp_path)
    assert str(bad) in str(info.value) and isinstance(info.value, IsoBenchError)  # the CLI prints it, exit 2


def test_missing_or_empty_folder_or_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(LeaderboardError, match="no such results folder"):
        write_leaderboard(tmp_path / "nowhere")
    (tmp_path / "results").mkdir()
    with pytest.raises(LeaderboardError, match="no result files"):
        write_leaderboard(tmp_path)
    with pytest.raises(LeaderboardError, match="unknown format 'html': one of markdown, csv, latex"):
        write_leaderboard(tmp_path, fmt="html")
    assert FORMATS == ("markdown", "csv", "latex")


def test_write_leaderboard_writes_markdown_and_a_linked_plot(tmp_path: Path) -> None:
    small_case(tmp_path / "in")
    out = tmp_path / "board" / "minilm.md"
    png = out.parent / "minilm-org__alpha.png"
    assert write_leaderboard(tmp_path / "in", out) == [out, png]
    text = out.read_text(encoding="utf-8")
    assert text.startswith(EXPECTED_MARKDOWN.split("## Models compared")[0])
    assert ("![mean STS score × 100 against sentence IsoScore on Isotropy-STSB, org/alpha @ 0123456789ab]"
            "(minilm-org__alpha.png)") in text
    assert png.read_bytes().startswith(b"\x89PNG") and b"Software" not in png.read_bytes()
    first = png.read_bytes()
    assert write_leaderboard(str(tmp_path / "in"), str(out)) == [out, png]
    assert png.read_bytes() == first and out.read_text(encoding="utf-8") == text
    assert write_leaderboard(tmp_path / "in", fmt="csv", plot=False) == EXPECTED_CSV
    assert write_leaderboard(tmp_path / "in") == EXPECTED_MARKDOWN  # no file: no plot, no link
    assert write_leaderboard(tmp_path / "in", tmp_path / "t.tex", fmt="latex") == [tmp_path / "t.tex"]
    assert (tmp_path / "t.tex").read_text(encoding="utf-8") == EXPECTED_LATEX


def test_write_plots_points(tmp_path: Path) -> None:
    board = build_leaderboard(read_results(small_case(tmp_path)))
    plot = plot_data(board.sections[0])
    assert plot is not None and plot.series == (
        ("mean MTEB-STS (2 tasks, cosine Spearman)", (("raw", 0.277153, 77.2), ("whiten", 1.0, 72.7))),)
    assert write_plots(board, tmp_path / "p", "x") == {"org__alpha": "x-org__alpha.png"}


def test_names_and_groups() -> None:
    assert split_model_name("sentence-transformers/all-MiniLM-L6-v2+whiten-256") == (
        "sentence-transformers/all-MiniLM-L6-v2", "whiten-256")
    assert split_model_name("a/b+c+clip-dims=1,2") == ("a/b+c", "clip-dims=1,2")
    assert [place(t)[0].key for t in ("SICK-R", "SICK-R-SentEval", "WiC", "WSD-ALL", "Isotropy-STSB", "X")] == [
        "mteb-sts", "paper-sts", "word", "word", "isotropy", "other"]
    assert (format_delta(-2.1, "percent"), format_delta(1.2, "percent"), format_delta(-0.001, "percent")) == (
        "−2.10", "+1.20", "±0.00")


# ------------------------------------------------------------------ groups from the task cards


def set_record(path: Path, **fields: object) -> None:
    """Add ``fields`` to the iso_bench record of a result file (e.g. the ``task_type`` the runner writes)."""
    data = json.loads(path.read_text())
    data["scores"]["test"][0]["iso_bench"].update(fields)
    path.write_text(json.dumps(data))


def test_groups_and_column_order_come_from_the_cards(tmp_path: Path) -> None:
    """Groups by their card group's order; columns in card order (STS12, STSBenchmark, SICK-R), not by name."""
    for task in ("SICK-R", "WSD-ALL", "STSBenchmark", "STS12-SentEval", "STS12", "WiC"):
        write_result(tmp_path, "org/alpha", "raw", task, 0.5)
    tables = build_leaderboard(read_results(tmp_path)).sections[0].tables
    assert [t.title.split(":")[0] for t in tables] == ["MTEB STS", "paper STS (SentEval)", "word level"]
    assert [c.label for c in tables[0].columns] == ["STS12", "STSBenchmark", "SICK-R",
                                                    "mean MTEB-STS (3 tasks, cosine Spearman)"]
    assert [c.label for c in tables[2].columns] == ["WiC", "WSD-ALL"]


def test_uncarded_task_goes_to_its_recorded_mteb_type(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    small_case(tmp_path)
    for variant, score in (("raw", 0.80), ("whiten", 0.75)):
        set_record(write_result(tmp_path, "org/alpha", variant, "Banking77Classification", score),
                   task_type="Classification")
    monkeypatch.setitem(sys.modules, "mteb", None)  # the recorded type is enough: mteb is never asked
    tables = build_leaderboard(read_results(tmp_path)).sections[0].tables
    assert [t.title for t in tables] == ["MTEB STS: main score × 100 (cosine Spearman)",
                                         "isotropy diagnostics: Isotropy-STSB",
                                         "MTEB Classification: main score × 100 (main score)"]
    assert [c.value for r in tables[2].rows for c in r.cells] == [80.0, None, 75.0]  # raw, abtt (missing), whiten
    assert [c.label for c in tables[2].columns] == ["Banking77Classification"]


def test_uncarded_task_without_a_recorded_type_asks_mteb(monkeypatch: pytest.MonkeyPatch) -> None:
    task = types.SimpleNamespace(metadata=types.SimpleNamespace(type="Retrieval"))
    monkeypatch.setitem(sys.modules, "mteb", types.SimpleNamespace(get_task=lambda name: task))
    assert place("SciFact") == (place("SciFact")[0], "SciFact") and place("SciFact")[0].title == "MTEB Retrieval"
    monkeypatch.setitem(sys.modules, "mteb", None)  # no mteb (or no such task): other tasks
    assert place("SciFact")[0].title == "other tasks"


# ------------------------------------------------------------------ presentation: clip, whiten


def test_clip_that_zeroed_nothing_is_not_called_best(tmp_path: Path) -> None:
    small_case(tmp_path)
    nothing = [{"level": "sentence", "n_vectors": 10, "learned": {"dim_": 384, "dims_": []}}]
    write_result(tmp_path, "org/alpha", "clip", "STS12", 0.7237, fits=nothing)
    write_result(tmp_path, "org/alpha", "clip", "STSBenchmark", 0.8203, fits=nothing)
    table = build_leaderboard(read_results(tmp_path)).sections[-1].tables[0]
    assert [(r.variant, r.tag) for r in table.rows] == [("raw", "best"), ("clip", "= raw (no dimension zeroed)")]
    text = markdown_table(table)
    assert "| org/alpha | 0123456789ab | clip = raw (no dimension zeroed) |" in text and "clip (best)" not in text
    assert ("- clip = raw (no dimension zeroed): tied for best only because every one of its fits zeroed no "
            "dimension, so its vectors are raw's; not counted as best.") in text
    assert "dimensions zeroed: none" in dict(table.provenance)["fit"][1]
    # a clip that zeroed a dimension in one fit and still ties raw is a best variant
    write_result(tmp_path, "org/alpha", "clip", "STS12", 0.7237,
                 fits=[{"level": "sentence", "n_vectors": 10, "learned": {"dim_": 384, "dims_": [7]}}])
    table = build_leaderboard(read_results(tmp_path)).sections[-1].tables[0]
    assert [(r.variant, r.tag) for r in table.rows] == [("raw", "best"), ("clip", "best")]
    assert "no dimension zeroed" not in markdown_table(table)


def test_whitened_iw_is_withheld_not_missing(tmp_path: Path) -> None:
    small_case(tmp_path)
    write_result(tmp_path, "org/alpha", "whiten-256", "Isotropy-STSB", 0.9,
                 metrics={"sentence_iw": 0.9, "sentence_isoscore": 1.0, "token_iw": 0.83})
    iso = build_leaderboard(read_results(tmp_path)).sections[0].tables[1]
    assert [c.label for c in iso.columns] == ["sentence I(W)", "sentence IsoScore", "token I(W)"]
    cells = {r.variant: r.cells for r in iso.rows}
    assert [(c.value, c.withheld, c.missing) for c in cells["whiten-256"]] == [
        (None, True, False), (1.0, False, False), (None, True, False)]
    assert [(c.value, c.missing) for c in cells["abtt"]] == [(None, True)] * 3
    assert cells["raw"][0].value == 0.766573 and not cells["raw"][0].withheld
    assert iso.notes[-1] == "Missing (–): abtt on Isotropy-STSB: no result file, or a non-finite score."
    assert iso.notes[1].startswith("I(W) of whitened vectors (whiten, whiten-256) is not shown (–, not a missing "
                                   "result): I(W) takes its directions from the eigenvectors of WᵀW;")
    assert "| whiten-256 |               – |    1.0000 (+0.7228) |            – |" in markdown_table(iso)


def test_whiten_provenance_says_which_directions_it_kept(tmp_path: Path) -> None:
    def fits(kept: int, dropped: int) -> list:
        return [{"level": "sentence", "n_vectors": 10, "learned": {"n_components_": kept, "dropped_": dropped,
                                                                    "dim_": 384}}]

    write_result(tmp_path, "org/alpha", "whiten", "STS12", 0.65, fits=fits(381, 3))
    write_result(tmp_path, "org/alpha", "whiten-256", "STS12", 0.66, fits=fits(256, 0))
    prov = dict(build_leaderboard(read_results(tmp_path)).sections[0].tables[0].provenance)
    fit = "fit on the evaluated task's own texts (split test; transductive), sentence level, seed 0"
    assert prov["fit"] == (f"whiten (n_components=null): {fit}; 381 of 384 directions kept (3 without variance "
                           "dropped)", f"whiten-256 (n_components=null): {fit}")  # nothing dropped: nothing said


# ------------------------------------------------------------------ the run summary


def run_summary(tasks: list[str]) -> types.SimpleNamespace:
    """A RunSummary's fields that the summary reads: raw has every score, whiten failed on the last task."""
    scores = {"org/alpha+raw": {t: 0.5 + i / 10 for i, t in enumerate(tasks)},
              "org/alpha+whiten": {t: (0.45 + i / 10 if i < len(tasks) - 1 else None) for i, t in enumerate(tasks)}}
    return types.SimpleNamespace(model="org/alpha", revision="r1", tasks=tasks, scores=scores)


def test_run_summary_exact() -> None:
    assert format_summary(run_summary(["STS12", "Isotropy-STSB"])) == """\
| variant   | STS12   | Isotropy-STSB   |
|-----------|---------|-----------------|
| raw       | 50.00   | 60.00           |
| whiten    | 45.00   | –               |"""


def test_summary_header_lists_only_what_ran() -> None:
    assert summary_header(run_summary(["STS12", "STSBenchmark", "Isotropy-STSB"])) == (
        "org/alpha @ r1: main score x 100 (MTEB STS: cosine Spearman; isotropy diagnostics: sentence I(W))")
    assert summary_header(run_summary(["WiC", "Banking77Classification", "STS12-SentEval", "SciFact"])) == (
        "org/alpha @ r1: main score x 100 (paper STS (SentEval): wmean Spearman; word level: WiC accuracy, WSD-ALL "
        "F1; Banking77Classification, SciFact: main score)")


def test_import_loads_neither_torch_nor_mteb() -> None:
    code = ("import sys, iso_bench.report; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'mteb', 'matplotlib'}))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"
