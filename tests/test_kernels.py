"""The kernels: pinned to AVX2 by default, named in every result, and a key of the raw-vector and fit caches.

The whole-run test lowers the host to what an AVX2-only CPU gives (``ATEN_CPU_CAPABILITY=avx2``,
``ONEDNN_MAX_CPU_ISA=AVX2``, ``MKL_ENABLE_INSTRUCTIONS=AVX2``: on the AVX-512 AMD EPYC that made the v2 board these
give, with each library's own kernels, the very instance file a 2-core AVX2-only EPYC gave for raw STS12-SentEval).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from iso_bench import kernels
from iso_bench.kernels import FIRST_CLASS, PINS, KernelError, kernel_mode, namespace_suffix, pin_kernels
from iso_bench.vectors.fit_cache import fit_key, key_name
from tests.conftest import MINILM, small_mirror

AVX2_HOST = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}


def test_a_bad_mode_is_one_line_naming_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ISO_BENCH_KERNELS", "fast")
    with pytest.raises(KernelError, match=r"^\$ISO_BENCH_KERNELS='fast': choose one of avx2, native$"):
        kernel_mode()
    with pytest.raises(KernelError, match=r"^--kernels='sse': choose one of avx2, native$"):
        kernel_mode("sse")


def test_pinning_sets_each_library_and_native_gives_back_what_it_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    mode = os.environ.get("ISO_BENCH_KERNELS")
    monkeypatch.setattr(kernels, "_previous", {})  # this process's own pins stay as they are
    for name in PINS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MKL_CBWR", "COMPATIBLE")
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")  # a CPU without AVX2: kept, its own class
    try:
        assert pin_kernels("avx2") == "avx2"
        assert {k: os.environ.get(k) for k in PINS} == {**PINS, "ATEN_CPU_CAPABILITY": "default"}
        assert pin_kernels("native") == "native" and os.environ["ISO_BENCH_KERNELS"] == "native"
        assert {k: os.environ.get(k) for k in PINS} == {"ATEN_CPU_CAPABILITY": "default", "MKL_CBWR": "COMPATIBLE",
                                                      "ONEDNN_MAX_CPU_ISA": None, "MKL_ENABLE_INSTRUCTIONS": None,
                                                      "OPENBLAS_CORETYPE": None, "FBGEMM_ENABLE_INSTRUCTIONS": None,
                                                      "NPY_DISABLE_CPU_FEATURES": None}
    finally:
        pin_kernels(mode)


def test_the_first_class_keeps_the_namespace_and_the_fit_key_without_a_class() -> None:
    assert namespace_suffix(FIRST_CLASS) == "" and namespace_suffix("cpu-avx2") == "-cpu-avx2"
    from iso_bench.vectors.fit_cache import FORMAT

    before = {"format": FORMAT, "namespace": "m/r/e", "corpus": {}, "groups": [], "method": "Raw", "params": {},
              "level": "sentence"}
    from iso_bench.methods import make_method

    method = make_method("raw")[0]
    key = fit_key(namespace="m/r/e", corpus={}, groups=[], method=method, level="sentence")
    assert {k: v for k, v in key.items() if k != "code"} == before
    other = fit_key(namespace="m/r/e", corpus={}, groups=[], method=method, level="sentence", kernels="cuda-sm90")
    assert other == {**key, "kernels": "cuda-sm90"} and key_name(other) != key_name(key)


def test_fits_are_keyed_by_the_openblas_kernels_they_ran_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """numpy loaded before iso-bench pinned it keeps its own OpenBLAS kernels: its fits get a key of their own."""
    monkeypatch.setattr(kernels, "kernel_class", lambda device: "cpu-avx2")
    monkeypatch.setattr(kernels, "openblas_coretype", lambda: "Haswell")
    assert kernels.fit_kernels() == "cpu-avx2+openblas-haswell"
    monkeypatch.setattr(kernels, "openblas_coretype", lambda: "SkylakeX")
    assert kernels.fit_kernels() == "cpu-avx2+openblas-skylakex"
    monkeypatch.setattr(kernels, "kernel_class", lambda device: FIRST_CLASS)
    assert kernels.fit_kernels() is None  # the keys the v2 board's first fits were stored under


def test_a_store_of_one_class_never_serves_another(tiny_backbone, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    from iso_bench.vectors import store as store_module
    from iso_bench.vectors.store import EmbeddingStore

    texts = ["a cat sat on the mat", "the dog", "money in the bank"]
    first = EmbeddingStore(tiny_backbone, tmp_path, progress=False)
    first.sentences(texts)
    assert first.folder.name.endswith(namespace_suffix(first.kernel_class))
    monkeypatch.setattr(store_module, "kernel_class", lambda device: "cuda-sm90")
    gpu = EmbeddingStore(tiny_backbone, tmp_path, progress=False)
    gpu.sentences(texts)
    assert gpu.folder.name == first.folder.name.removesuffix(namespace_suffix(first.kernel_class)) + "-cuda-sm90"
    assert gpu.stats == {"computed": 3, "reused": 0}  # encoded again, not read from the other class
    assert json.loads((gpu.folder / "meta.json").read_text())["kernel_class"] == "cuda-sm90"
    monkeypatch.setattr(store_module, "kernel_class", lambda device: FIRST_CLASS)
    unsuffixed = EmbeddingStore(tiny_backbone, tmp_path, progress=False)
    assert unsuffixed.folder.name == tiny_backbone.extraction.key()  # the folder of the caches written before


def _run(root: Path, mirror: Path, name: str, mode: str, lowered: bool) -> tuple[bytes, dict, set[str]]:
    """raw all-MiniLM-L6-v2 on the small STS12 in a process of its own: (instance file, the result's iso_bench
    record, the cache's namespaces after it)."""
    env = {k: v for k, v in os.environ.items() if k not in PINS}  # this process's pins are not inherited
    env.update({"ISO_BENCH_KERNELS": mode, "ISO_BENCH_THREADS": "1", **(AVX2_HOST if lowered else {})})
    results = root / name
    done = subprocess.run([sys.executable, "-m", "iso_bench", "run", "--model", MINILM, "--methods", "raw", "--tasks",
                           "STS12", "--results", str(results), "--cache-dir", str(root / "cache"), "--data-dir",
                           str(mirror), "--no-progress"], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    (units,) = results.rglob("STS12.instances.npz")
    (result,) = results.rglob("STS12.json")
    record = json.loads(result.read_text())["scores"]["test"][0]["iso_bench"]
    return units.read_bytes(), record, {p.parent.name for p in (root / "cache").rglob("meta.json")}


@pytest.mark.slow
def test_pinned_runs_give_the_same_file_on_the_host_and_lowered(tmp_path: Path, record_property) -> None:
    from huggingface_hub import snapshot_download

    try:
        snapshot_download(MINILM, local_files_only=True)
    except Exception:  # noqa: BLE001
        pytest.skip(f"{MINILM} is not in the Hugging Face cache")
    mirror = small_mirror(tmp_path / "mirror", ["sts12-sts"], 40)
    host, host_record, spaces = _run(tmp_path, mirror, "pinned", "avx2", lowered=False)
    low, low_record, after = _run(tmp_path, mirror, "pinned-low", "avx2", lowered=True)
    assert low == host  # the same bits
    assert after == spaces and len(spaces) == 1 and next(iter(spaces)).endswith("-cpu-avx2")  # one class, reused
    for record in (host_record, low_record):
        assert record["extraction"]["kernels"] == "avx2" and record["extraction"]["kernel_class"] == "cpu-avx2"
        assert record["environment"]["kernels"]["aten_cpu_capability"] == "AVX2"
        assert record["environment"]["kernels"]["openblas_coretype"] in (None, "Haswell")

    native_host, native_record, _ = _run(tmp_path, mirror, "native", "native", lowered=False)
    native_low, native_low_record, spaces = _run(tmp_path, mirror, "native-low", "native", lowered=True)
    plain = subprocess.run([sys.executable, "-c", "import torch; print(torch.backends.cpu.get_cpu_capability())"],
                           env={k: v for k, v in os.environ.items() if k not in PINS}, capture_output=True,
                           text=True, check=True).stdout.strip()
    assert native_record["environment"]["kernels"]["aten_cpu_capability"] == plain  # the host's own capability
    assert native_low_record["environment"]["kernels"]["aten_cpu_capability"] == "AVX2"
    classes = {native_record["extraction"]["kernel_class"], native_low_record["extraction"]["kernel_class"]}
    assert len(classes) == 2 and "cpu-avx2" not in classes and len(spaces) == 3  # never one namespace
    differs = native_host != native_low  # on a host with AVX-512 (the v2 board's EPYC) they differ
    record_property("native_lowered_differs", differs)
    print(f"native kernels, {plain} host vs lowered to AVX2: instance files {'differ' if differs else 'identical'}")


def test_results_present_of_other_kernels_are_named_once_a_run_makes_vectors() -> None:
    """A run that computes variants beside results made with other kernels (the v2 board's first results, made
    before classes were recorded, or another class) says so in one line per task; a run that made no vectors, or
    results of its own class, say nothing."""
    from types import SimpleNamespace

    from iso_bench.grid.plan import OLDER_KERNELS, RunSummary, compare_kernels

    def result(extraction):
        return SimpleNamespace(scores={"test": [{"main_score": 0.7, "iso_bench": {"extraction": extraction}}]})

    summary = RunSummary(model="org/m", revision="r", tasks=["STS12"])
    compare_kernels(summary, "STS12", "org/m+raw", result({"pooling": "mean"}), "cpu-avx2")
    compare_kernels(summary, "STS12", "org/m+zscore", result({"kernel_class": FIRST_CLASS}), "cpu-avx2")
    compare_kernels(summary, "STS12", "org/m+center", result({"kernel_class": "cpu-avx2"}), "cpu-avx2")
    compare_kernels(summary, "STS13", "org/m+raw", result({"pooling": "mean"}), None)  # no vectors made
    [note] = summary.data_notes()
    assert note.startswith(f"STS12: 2 result(s) present were computed with other kernels ({FIRST_CLASS}, "
                           f"{OLDER_KERNELS}) than this run's (cpu-avx2)")
