"""The kernels a result records are the kernels that ran, on every route (the fourth fault drill): ``import mteb``
before ``import iso_bench`` records the mode in force (native where numpy's OpenBLAS or torch were loaded before
the pin), never the avx2 it asked for; each library's setting is spelled as that library reads it
(``ATEN_CPU_CAPABILITY=DEFAULT`` lower-cased before torch reads it, ``MKL_CBWR=compatible`` upper-cased); a user's
own settings that the avx2 mode replaces are said once when the work starts (never at import) and recorded. Each
case runs in a process of its own: the libraries read their settings once, when loaded."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from iso_bench.kernels import PINS, REPLACED_ENV
from tests.conftest import MINILM, SHARED_DATA

pytest.importorskip("torch")


def _python(code: str, **env: str) -> subprocess.CompletedProcess:
    clean = {k: v for k, v in os.environ.items() if k not in PINS and k not in ("ISO_BENCH_KERNELS", REPLACED_ENV)}
    return subprocess.run([sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True,
                          timeout=600)


def _native_openblas() -> str:
    """The kernels numpy's OpenBLAS runs on this CPU when nothing pins it."""
    done = _python("from iso_bench.kernels import openblas_coretype; print(openblas_coretype())",
                   ISO_BENCH_KERNELS="native")
    return done.stdout.strip()


def test_mteb_imported_first_records_the_kernels_that_ran_and_says_so_once() -> None:
    code = ("import mteb, iso_bench, json\nfrom iso_bench.kernels import describe_kernels, kernel_class\n"
            "print(json.dumps(describe_kernels())); describe_kernels()")
    done = _python(code)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout.strip().splitlines()[-1])
    if _native_openblas() in ("Haswell", "None"):
        pytest.skip("numpy's OpenBLAS runs Haswell kernels on this CPU unpinned: nothing to tell apart")
    assert record["openblas_coretype"] != "Haswell"  # numpy was loaded by mteb before iso-bench pinned it
    assert record["mode"] == "native" and record["asked"] == "avx2"
    assert any("numpy's OpenBLAS runs" in why for why in record["not_in_force"])
    warned = [line for line in done.stderr.splitlines() if "not all in force" in line]
    assert len(warned) == 1 and "import iso_bench before mteb" in warned[0]  # once, though described twice
    pinned = _python("import iso_bench, mteb, json\nfrom iso_bench.kernels import describe_kernels\n"
                     "print(json.dumps(describe_kernels()))")
    record = json.loads(pinned.stdout.strip().splitlines()[-1])
    assert record["mode"] == "avx2" and "asked" not in record and record["class"] == "cpu-avx2"
    assert "not all in force" not in pinned.stderr


def test_an_upper_case_default_is_lowered_before_torch_reads_it() -> None:
    """torch compares ATEN_CPU_CAPABILITY with lower-case names and ignores DEFAULT (with a warning), running its
    best kernels: lowered at import, it runs the default kernels, kept as their own class."""
    code = ("import iso_bench, torch, os\nfrom iso_bench.kernels import check_kernels\n"
            "print(os.environ['ATEN_CPU_CAPABILITY'], torch.backends.cpu.get_cpu_capability(), check_kernels())")
    done = _python(code, ATEN_CPU_CAPABILITY="DEFAULT")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["default", "DEFAULT", "cpu-default"]
    assert "ignoring invalid value" not in done.stderr


def test_mkl_reads_its_branch_in_upper_case_only_and_gets_it() -> None:
    """MKL_CBWR=compatible is ignored by MKL without a word (its branch stays AUTO): upper-cased at import."""
    code = ("import iso_bench, torch\nfrom iso_bench.kernels import mkl_cbwr\n"
            "torch.ones(4) @ torch.ones(4)\nprint(mkl_cbwr())")
    done = _python(code, MKL_CBWR="compatible", ISO_BENCH_KERNELS="native")
    if done.stdout.strip() == "None":
        pytest.skip("torch has no MKL here")
    assert done.stdout.strip() == "COMPATIBLE", done.stderr


def test_a_users_own_settings_are_said_once_when_the_work_starts_and_recorded() -> None:
    code = ("import sys, iso_bench\nprint('imported', flush=True); print('--', file=sys.stderr, flush=True)\n"
            "from iso_bench.kernels import check_kernels, describe_kernels\nimport json, subprocess\n"
            "check_kernels(); check_kernels()\nprint(json.dumps(describe_kernels().get('replaced')))\n"
            "child = subprocess.run([sys.executable, '-c', 'import iso_bench, json; from iso_bench.kernels import "
            "describe_kernels; print(json.dumps(describe_kernels().get(\"replaced\")))'], capture_output=True, "
            "text=True)\nprint(child.stdout.strip())")
    done = _python(code, MKL_CBWR="COMPATIBLE", OPENBLAS_CORETYPE="SkylakeX")
    assert done.returncode == 0, done.stderr
    at_import, after = done.stderr.split("--\n", 1)
    assert at_import == ""  # nothing said at import: every worker imports iso-bench
    said = [line for line in after.splitlines() if "replace your own" in line]
    assert said == ["the avx2 kernels (ISO_BENCH_KERNELS=avx2) replace your own MKL_CBWR=COMPATIBLE, "
                    "OPENBLAS_CORETYPE=SkylakeX; each result records them. Use --kernels native "
                    "(ISO_BENCH_KERNELS=native) to keep yours"], after
    expected = {"MKL_CBWR": "COMPATIBLE", "OPENBLAS_CORETYPE": "SkylakeX"}
    lines = done.stdout.strip().splitlines()
    assert json.loads(lines[-2]) == expected and json.loads(lines[-1]) == expected  # a process it starts too
    kept = _python(code, MKL_CBWR="COMPATIBLE", OPENBLAS_CORETYPE="SkylakeX", ISO_BENCH_KERNELS="native")
    assert "replace your own" not in kept.stderr and kept.stdout.strip().splitlines()[-2:] == ["null", "null"]


@pytest.mark.slow
def test_mteb_evaluate_after_mteb_records_native_in_the_result(tmp_path) -> None:
    """The README's route with the imports the other way round: mteb.evaluate of a variant writes a result
    whose record names the kernels that ran, never the avx2 mode it asked for."""
    if _native_openblas() in ("Haswell", "None"):
        pytest.skip("numpy's OpenBLAS runs Haswell kernels on this CPU unpinned: nothing to tell apart")
    code = ("import mteb, iso_bench, json\nfrom iso_bench.data.sources import get_task\n"
            f"r = mteb.evaluate(mteb.get_model({MINILM + '+center'!r}), get_task('STS16', {str(SHARED_DATA)!r}), "
            f"cache=mteb.ResultCache({str(tmp_path)!r}), show_progress_bar=False)\n"
            "print(json.dumps(r.task_results[0].scores['test'][0]['iso_bench']['environment']['kernels']))")
    done = _python(code, ISO_BENCH_CACHE=os.environ.get("ISO_BENCH_CACHE", str(tmp_path / "cache")))
    assert done.returncode == 0, done.stderr[-3000:]
    kernels = json.loads(done.stdout.strip().splitlines()[-1])
    assert kernels["mode"] == "native" and kernels["asked"] == "avx2" and kernels["openblas_coretype"] != "Haswell"
    (result,) = tmp_path.rglob("STS16.json")
    extraction = json.loads(result.read_text())["scores"]["test"][0]["iso_bench"]["extraction"]
    assert extraction["kernels"] == "native"
