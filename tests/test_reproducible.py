"""The same numbers from every path: a text's raw vector does not depend on the other texts of its batch, so
results are bit-identical whatever the task order, the cache state, the batch size and the engine.

STSBenchmark and STSBenchmark-SentEval share most of their texts: whichever runs first encodes them, and the
second reuses them from the cache. Under the old padded policy the vectors, and so the per-pair similarities,
depend on that history; under equal-length batches they do not.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from iso_bench.backbones.base import EQUAL_LENGTH, PADDED, plan_batches
from iso_bench.results.units_file import unpack
from tests.conftest import MINILM, SHARED_DATA

TEXTS = ["the cat sat on the mat", "a dog", "the man is playing the guitar", "a girl plays", "the bank",
         "money", "the woman is slicing a cucumber", "a boy is playing the piano", "the river bank",
         "a cat", "the dog sat", "hair", "a man plays music"]


def test_equal_length_batches_never_mix_lengths_and_hold_each_text_once() -> None:
    lengths = [5, 3, 5, 7, 3, 3, 5, 1, 7]
    for size in (1, 2, 3, 32):
        batches = plan_batches(lengths, size)
        assert sorted(i for b in batches for i in b) == list(range(len(lengths)))
        assert all(len(b) <= size and len({lengths[i] for i in b}) == 1 for b in batches)
        # longest first; within a length, input order
        assert [i for b in batches for i in b] == sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    assert any(len({lengths[i] for i in b}) > 1 for b in plan_batches(lengths, 3, PADDED))
    with pytest.raises(ValueError, match="unknown batching policy 'sorted'"):
        plan_batches(lengths, 3, "sorted")


def test_a_chunk_of_long_texts_closes_at_its_token_rows_and_the_chunks_hold_the_plans_rows() -> None:
    """A shard holds ``chunk`` texts or ``chunk`` x CHUNK_ROWS_PER_TEXT token rows, whichever comes first (five
    300-token texts do not wait for a fourth), and the chunks together are the plan's rows, each once."""
    from iso_bench.backbones.base import CHUNK_ROWS_PER_TEXT, stream_batches

    lengths = [300] * 5 + [10] * 10
    batches = plan_batches(lengths, 2)
    seen: list[list[int]] = []

    def encode_batch(run: list[int]) -> dict[str, list[float]]:
        seen.append(run)
        return {"sentence": [float(i) for i in run]}

    chunks = list(stream_batches(batches, ["sentence"], encode_batch, "", False, lengths, chunk=4))
    assert 4 * CHUNK_ROWS_PER_TEXT < 2 * 300
    assert [idx for idx, _ in chunks] == [[0, 1], [2, 3], [4], [5, 6, 7, 8], [9, 10, 11, 12], [13, 14]]
    assert [r for _, rows in chunks for r in rows["sentence"]] == [float(i) for i in range(15)]
    assert seen[2] == [4]  # a 300-token text fills a pass alone (MIN_ROWS)
    by_count = list(stream_batches(batches, ["sentence"], encode_batch, "", False, None, chunk=4))  # lengths unknown
    assert [idx for idx, _ in by_count] == [[0, 1, 2, 3], [4, 5, 6, 7, 8], [9, 10, 11, 12], [13, 14]]


def _vectors(backbone, texts: list[str], batch_size: int) -> np.ndarray:
    return np.stack(backbone.encode(texts, kinds=("sentence",), batch_size=batch_size, progress=False)["sentence"])


def test_a_texts_vector_does_not_depend_on_its_batch(tiny_backbone) -> None:
    """Whatever the batch size and order, each text gets the bits it gets when encoded alone."""
    from dataclasses import replace

    bb = tiny_backbone.with_extraction(replace(tiny_backbone.extraction, batching=EQUAL_LENGTH))
    alone = np.stack([_vectors(bb, [t], 1)[0] for t in TEXTS])
    for size in (2, 3, 32):
        np.testing.assert_array_equal(_vectors(bb, TEXTS, size), alone)
        np.testing.assert_array_equal(_vectors(bb, TEXTS[::-1], size)[::-1], alone)
    assert bb.describe()["extraction"]["batching"] == EQUAL_LENGTH


def test_the_policy_keeps_its_vectors_apart_in_the_cache(tiny_backbone) -> None:
    """Vectors of the two policies never share a cache folder; the padded one keeps iso-bench 0.1's folder."""
    from dataclasses import replace

    padded = replace(tiny_backbone.extraction, batching=PADDED)
    equal = replace(tiny_backbone.extraction, batching=EQUAL_LENGTH)
    assert padded.key() == "mean-L-1-max64" and equal.key() == "mean-L-1-max64-equal-length"  # a 64-token window


# ---- whole runs on the real all-MiniLM-L6-v2 -------------------------------------------------------------
TASKS = ["STSBenchmark", "STSBenchmark-SentEval"]
METHODS = ["raw", "whiten", "flow"]
EVERY = 3  # the runs read every third pair of STS-B's test split (460 of 1,379: every genre and length), both copies


def _every_third_pair(root: Path) -> Path:
    """A data folder whose two copies of STS-B's test split (mteb's mirror and SentEval's file, the same pairs in
    the same order) hold every :data:`EVERY`-th pair; the other splits are the shared files, linked."""
    hub = SHARED_DATA / "hub" / "mteb" / "stsbenchmark-sts"
    senteval = SHARED_DATA / "senteval" / "downstream" / "STS" / "STSBenchmark"
    for source, folder in ((hub, root / "hub" / "mteb" / "stsbenchmark-sts"),
                           (senteval, root / "senteval" / "downstream" / "STS" / "STSBenchmark")):
        folder.mkdir(parents=True)
        for path in source.iterdir():
            if path.name in ("test.jsonl", "sts-test.csv"):
                lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
                (folder / path.name).write_text("".join(lines[::EVERY]), encoding="utf-8")
            else:
                (folder / path.name).symlink_to(path)
    return root


def _units(path: Path) -> list[np.ndarray]:
    """Every group's per-pair units in a units file, as float64, in the groups' sorted order."""
    with np.load(path) as units:
        groups = sorted({k.split("/units")[0] for k in units.files if "/units" in k})
        return [unpack(units, f"{key}/units") for key in groups]


def _outcome(results: Path) -> dict[tuple[str, str], tuple[float, str, bytes]]:
    """Per (variant folder, task): the main score, its recorded interval and the bytes of the per-pair units it is
    computed from."""
    out = {}
    for path in sorted(results.glob("results/*/*/**/*.json")):
        if path.name == "model_meta.json":
            continue
        data = json.loads(path.read_text())
        entry = data["scores"]["test"][0]
        arrays = b"".join(a.tobytes() for a in _units(path.with_name(path.stem + ".instances.npz")))
        assert arrays, path  # every result here keeps its units
        interval = json.dumps(entry["iso_bench"]["interval"], sort_keys=True)
        out[(path.relative_to(results).parts[1], data["task_name"])] = (entry["main_score"], interval, arrays)
    return out


def _run(tmp: Path, name: str, *, tasks: list[str], batch_size: int, cache: str, batching: str = EQUAL_LENGTH,
         engine: str = "local", data: Path = SHARED_DATA) -> dict[tuple[str, str], tuple[float, bytes]]:
    from iso_bench.grid.engines import make_engine
    from iso_bench.grid.grid import run_grid
    from iso_bench.grid.runner import RunConfig, run

    cfg = RunConfig(model=MINILM, methods=METHODS, tasks=tasks, results_dir=tmp / name, cache_dir=tmp / cache,
                    data_dir=data, batch_size=batch_size, seed=0, progress=False, threads=1,
                    batching=batching, resamples=200)
    if engine == "local":
        run(cfg)
    else:
        with make_engine(engine, workers=1) as dask:
            grid = run_grid([MINILM], cfg, engine=dask, say=lambda _: None)
        assert not grid.failed, grid.failed
    outcome = _outcome(tmp / name)
    assert len(outcome) == len(METHODS) * len(tasks), sorted(outcome)
    return outcome


@pytest.fixture(scope="module")
def runs(tmp_path_factory, hub_mirror, minilm_backbone) -> dict[str, dict]:
    tmp = tmp_path_factory.mktemp("reproducible")
    data = _every_third_pair(tmp / "data")
    runs = {
        "first": _run(tmp, "a", tasks=TASKS, batch_size=32, cache="cold-a", data=data),
        "reversed, batch 7": _run(tmp, "b", tasks=TASKS[::-1], batch_size=7, cache="cold-b", data=data),
        "warm cache": _run(tmp, "c", tasks=TASKS[::-1], batch_size=7, cache="cold-a", data=data),
        "padded": _run(tmp, "p", tasks=TASKS, batch_size=32, cache="padded-a", batching=PADDED, data=data),
        "padded, reversed, batch 7": _run(tmp, "q", tasks=TASKS[::-1], batch_size=7, cache="padded-b",
                                          batching=PADDED, data=data),
        "dask": _run(tmp, "d", tasks=TASKS[::-1], batch_size=13, cache="dask", engine="dask", data=data),
    }
    for task in TASKS:  # each scored on the 460 pairs
        (path,) = (tmp / "a").glob(f"results/*+raw/*/**/{task}.instances.npz")
        assert {a.shape[0] for a in _units(path)} == {460}, task
    return runs


@pytest.mark.slow
@pytest.mark.parametrize("other", ["reversed, batch 7", "warm cache", "dask"])
def test_results_are_bit_identical_whatever_the_order_cache_batch_and_engine(runs, other: str) -> None:
    first, again = runs["first"], runs[other]
    assert again.keys() == first.keys()
    differing = [key for key in first if first[key] != again[key]]
    assert not differing, f"{other}: main score or units differ for {differing}"


@pytest.mark.slow
def test_under_the_padded_policy_the_same_runs_differ(runs) -> None:
    """The test above can fail: with padded batches the per-pair units of raw already move."""
    first, again = runs["padded"], runs["padded, reversed, batch 7"]
    assert again.keys() == first.keys()
    differing = {key for key in first if first[key][2] != again[key][2]}
    assert any(folder.endswith("+raw") for folder, _ in differing), sorted(differing)
