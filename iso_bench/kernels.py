"""Which kernels compute the numbers: pinned to the AVX2 level by default, named in every result, and a key of
every cache, so that a run gives the same bits on any x86-64 CPU of the last decade and never mixes vectors or
fits made by other kernels.

The same model, data and package versions give other float rounding where the libraries under torch pick other
kernels for the CPU they find. On a CPU with AVX-512, three choices move the bits of a sentence vector (measured
on all-MiniLM-L6-v2): ATen's vectorised kernels (layer norm, softmax; ``ATEN_CPU_CAPABILITY``), oneDNN's (GELU;
``ONEDNN_MAX_CPU_ISA``) and MKL's GEMM mode (``MKL_CBWR``); the methods' fits run on numpy's OpenBLAS, which
picks its own kernels (``OPENBLAS_CORETYPE``), numpy's own loops pick theirs (``NPY_DISABLE_CPU_FEATURES``), and
so do FBGEMM's, torch's ``EmbeddingBag`` and quantized kernels (``FBGEMM_ENABLE_INSTRUCTIONS``). Each library reads its
setting once, when it first runs, so the settings are made before torch and numpy compute anything:
:func:`pin_kernels` sets them, and ``import iso_bench`` calls it (the mode in ``$ISO_BENCH_KERNELS``: ``avx2``, the
default, or ``native``, each library's own choice, faster on some CPUs). A process started by iso-bench (a local
Dask worker) inherits them.

A level the environment lowers ATen to (``ATEN_CPU_CAPABILITY=default``, what a CPU without AVX2 gets) is kept
and named: its vectors are of another class. :func:`kernel_class` names the class (``cpu-avx2``, ``cuda-sm90``,
``cpu-native-avx512-amd-25-17``): the raw-vector cache keeps each class in a namespace of its own and the fit
cache keys fits by it. :data:`FIRST_CLASS`, the class the v2 board was first made in, whose vectors the caches
written before classes were named hold, keeps the namespace without a suffix.

Example (library use: import iso_bench before torch computes anything)::

    import iso_bench                        # pins the kernels ($ISO_BENCH_KERNELS, default avx2)
    iso_bench.pin_kernels("native")         # or choose, still before torch's first operation
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import platform
import sys
from pathlib import Path
from typing import Any

from iso_bench.registry import IsoBenchError

logger = logging.getLogger(__name__)

MODE_ENV = "ISO_BENCH_KERNELS"
AVX2, NATIVE = "avx2", "native"
MODES = (AVX2, NATIVE)
PINS = {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2", "MKL_ENABLE_INSTRUCTIONS": "AVX2",
        "MKL_CBWR": "AVX2", "OPENBLAS_CORETYPE": "Haswell", "FBGEMM_ENABLE_INSTRUCTIONS": "AVX2",
        "NPY_DISABLE_CPU_FEATURES": "X86_V4 AVX512_ICL AVX512_SPR"}
"""What the ``avx2`` mode sets: each library's kernels at the AVX2 level (MKL on a CPU not made by Intel takes
``MKL_CBWR=AVX2`` as its automatic branch in reproducible mode; FBGEMM, torch's CPU kernels for ``EmbeddingBag``
and quantized operations, picks its own instruction set unless told (its ``EmbeddingBag`` adds a bag's rows in the
same order at either width: a static model's mean is the same either way); numpy 2's own AVX-512 loops (its
``exp``, ``log``, ``power`` and sorts among them) are turned off by name, which numpy reads at import)."""
KEPT_LOWER = {"ATEN_CPU_CAPABILITY": "default"}
"""A level below the pin that the environment may name and that is kept (its vectors are of their own class)."""
FIRST_CLASS = "cpu-native-avx512-amd-25-17"
"""The class the v2 board was first made in (each library's own kernels on a 2-core AMD EPYC, family 25
model 17, with AVX-512): its raw-vector cache namespaces are those written before classes were named."""
FIRST_OPENBLAS = "SkylakeX"
"""The kernels numpy's OpenBLAS runs on that CPU, where the v2 board's fits first ran."""
_MKL_CBWR = {1: "OFF", 2: "AUTO", 3: "COMPATIBLE", 4: "SSE2", 6: "SSSE3", 7: "SSE4_1", 8: "SSE4_2", 9: "AVX",
             10: "AVX2", 11: "AVX512_MIC", 12: "AVX512", 13: "AVX512_MIC_E1", 14: "AVX512_E1"}
_previous: dict[str, tuple[str | None, str]] = {}  # name: (what pin_kernels replaced, what it set)
CASES = {"ATEN_CPU_CAPABILITY": str.lower, "MKL_CBWR": str.upper, "MKL_ENABLE_INSTRUCTIONS": str.upper,
         "FBGEMM_ENABLE_INSTRUCTIONS": str.upper}
"""The settings whose library reads one case only: ATen compares with ``avx2``, ``default`` (and warns and ignores
``DEFAULT``); MKL takes ``COMPATIBLE`` and ignores ``compatible`` without a word (measured with
``mkl_serv_cbwr_get``); FBGEMM matches its names (``AVX2``, ``AVX512``) exactly. oneDNN lower-cases
``ONEDNN_MAX_CPU_ISA`` itself and OpenBLAS compares ``OPENBLAS_CORETYPE`` ignoring case: theirs are left as
written."""
REPLACED_ENV = "ISO_BENCH_KERNELS_REPLACED"
_torch_first = False  # torch was imported before the kernels were first pinned
_said: set[str] = set()  # the notices this process has given


class KernelError(IsoBenchError):
    """The kernels in force are not those the mode asks for (torch ran before they could be pinned)."""


def kernel_mode(mode: str | None = None) -> str:
    """``mode``, else ``$ISO_BENCH_KERNELS``, else ``avx2``; anything else is an error naming the choices."""
    text = (os.environ.get(MODE_ENV) or AVX2) if mode is None else mode
    if text not in MODES:
        where = f"${MODE_ENV}" if mode is None else "--kernels"
        raise KernelError(f"{where}={text!r}: choose one of {', '.join(MODES)}")
    return text


def pin_kernels(mode: str | None = None) -> str:
    """Set the libraries' kernel settings for ``mode`` (:func:`kernel_mode`) in this process's environment,
    which the processes it starts inherit, and return the mode. Effective only before torch and numpy compute
    anything; :func:`check_kernels` says whether they took. ``native`` restores what ``avx2`` replaced."""
    mode = kernel_mode(mode)
    global _torch_first
    _torch_first = _torch_first or "torch" in sys.modules  # then ATen may have chosen its kernels already
    for name, case in CASES.items():  # each library's own spelling: a value in another case is ignored
        if os.environ.get(name):
            os.environ[name] = case(os.environ[name])
    for name, (value, ours) in _previous.items():
        if os.environ.get(name) != ours:  # set since by someone else: theirs
            continue
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    _previous.clear()
    os.environ[MODE_ENV] = mode
    if mode == AVX2 and _has_avx2():
        for name, value in PINS.items():
            if os.environ.get(name, "").lower() == KEPT_LOWER.get(name):
                continue
            _previous[name] = (os.environ.get(name), value)
            os.environ[name] = value
    replaced = {**_inherited_replaced(), **{k: v for k, (v, ours) in _previous.items()
                                             if v is not None and v != ours}}
    if replaced and mode == AVX2:
        os.environ[REPLACED_ENV] = json.dumps(replaced, sort_keys=True)  # the processes it starts record them too
    else:
        os.environ.pop(REPLACED_ENV, None)
    return mode


def replaced_settings() -> dict[str, str]:
    """The user's own kernel settings that the ``avx2`` mode replaced in this process or the one that started it
    (name: the user's value); they are recorded with every result and said once at the start of a run."""
    return _inherited_replaced() if kernel_mode() == AVX2 else {}


def _inherited_replaced() -> dict[str, str]:
    try:
        found = json.loads(os.environ.get(REPLACED_ENV) or "{}")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}


def cpu_capability() -> str:
    """The CPU capability ATen's vectorised kernels dispatch to in this process (``AVX2``, ``AVX512``, ...)."""
    import torch  # lazily: torch takes seconds to import

    return str(torch.backends.cpu.get_cpu_capability())


def kernel_class(device: str = "cpu") -> str:
    """The class of kernels that computes on ``device``: ``cuda-sm<major><minor>``, ``mps``, or for the CPU
    ``cpu-<ATen's capability>`` where the ``avx2`` mode's settings are in force, else ``cpu-native-<capability>-
    <vendor>-<family>-<model>`` (with a digest of any kernel setting the environment names)."""
    import torch  # lazily: torch takes seconds to import

    if device.startswith("cuda"):
        if not torch.cuda.is_available():  # named but not present (a stand-in backbone): no capability to read
            return "cuda"
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        return f"cuda-sm{major}{minor}"
    if device.startswith("mps"):
        return "mps"
    capability = cpu_capability().lower()
    if _pinned() and capability in (AVX2, KEPT_LOWER["ATEN_CPU_CAPABILITY"]):
        return f"cpu-{capability}"
    named = {k: os.environ[k] for k in sorted(PINS) if os.environ.get(k)}
    digest = "-" + hashlib.sha256(json.dumps(named).encode()).hexdigest()[:8] if named else ""
    return f"cpu-native-{capability}-{cpu_model()}{digest}"


def namespace_suffix(klass: str) -> str:
    """What a raw-vector namespace's folder name carries for ``klass``: nothing for :data:`FIRST_CLASS`."""
    return "" if klass == FIRST_CLASS else f"-{klass}"


def fit_kernels() -> str | None:
    """The kernels fits run on, for the fit cache's key: the CPU's class and the kernels numpy's OpenBLAS runs
    (chosen when numpy was loaded, which may be before iso-bench pinned them); None for :data:`FIRST_CLASS`
    with OpenBLAS's own ``SkylakeX`` kernels, the keys written before classes were named."""
    klass, blas = kernel_class("cpu"), openblas_coretype()
    if klass == FIRST_CLASS and blas == FIRST_OPENBLAS:
        return None
    return f"{klass}+openblas-{str(blas).lower()}"


def check_kernels(device: str = "cpu") -> str:
    """The class computing on ``device``, after checking that the ``avx2`` mode's kernels are in force where it
    is asked for: torch's chosen before the settings were made is a :class:`KernelError`; numpy's OpenBLAS loaded
    before them is a warning (its fits are then keyed by the kernels it runs, :func:`fit_kernels`)."""
    if kernel_mode() == AVX2 and _has_avx2():
        if cpu_capability().lower() not in (AVX2, KEPT_LOWER["ATEN_CPU_CAPABILITY"]):
            raise KernelError(f"torch dispatches to {cpu_capability()} kernels, not AVX2: {_why_not_pinned()}; "
                              f"import iso_bench before torch (or start the process with {MODE_ENV}=avx2 set), "
                              f"or use --kernels native ({MODE_ENV}=native)")
    announce_kernels()
    return kernel_class(device)


def _why_not_pinned() -> str:
    aten = os.environ.get("ATEN_CPU_CAPABILITY")
    if _torch_first or aten is None:
        return "torch ran before iso-bench could pin them"
    return f"torch ignored ATEN_CPU_CAPABILITY={aten} (set after torch had chosen its kernels)"


def not_in_force() -> list[str]:
    """What keeps the ``avx2`` mode asked for from being the mode in force, one phrase per library (empty where
    it is in force, or not asked for): ATen dispatching to other kernels, numpy's OpenBLAS loaded before the pin
    (then :func:`describe_kernels` records the mode ``native``)."""
    if kernel_mode() != AVX2 or not _has_avx2():
        return []
    out = []
    if not _pinned():
        out.append("the avx2 settings were changed after iso_bench was imported")
    if (capability := cpu_capability()).lower() not in (AVX2, KEPT_LOWER["ATEN_CPU_CAPABILITY"]):
        out.append(f"torch dispatches to {capability} kernels ({_why_not_pinned()})")
    if (blas := openblas_coretype()) not in (None, PINS["OPENBLAS_CORETYPE"]):
        out.append(f"numpy's OpenBLAS runs {blas} kernels, not Haswell (numpy was imported before iso_bench)")
    return out


def announce_kernels() -> None:
    """Say once per process, at the start of the work (never at import: every worker imports iso-bench), the
    user's kernel settings the ``avx2`` mode replaced, and what keeps it from being in force."""
    replaced = replaced_settings()
    if replaced and "replaced" not in _said:
        _said.add("replaced")
        logger.warning("the avx2 kernels (%s=avx2) replace your own %s; each result records them. Use --kernels "
                       "native (%s=native) to keep yours", MODE_ENV,
                       ", ".join(f"{k}={v}" for k, v in sorted(replaced.items())), MODE_ENV)
    missing = not_in_force()
    if missing and "missing" not in _said:
        _said.add("missing")
        logger.warning("the avx2 kernels are not all in force (%s): the results record the mode native and the "
                       "kernels that ran; import iso_bench before mteb, torch and numpy to pin them",
                       "; ".join(missing))


def describe_kernels(device: str = "cpu") -> dict[str, Any]:
    """What every result records of the kernels that made it: the mode in force (``native``, with ``asked`` and
    ``not_in_force``, where the ``avx2`` asked for is not: :func:`not_in_force`) and the class; ATen's capability,
    MKL's reproducibility branch and numpy's OpenBLAS kernels as in force; MKL's and oneDNN's settings as
    requested (they report nothing back), and the user's own that the mode replaced; on a GPU its name and compute
    capability."""
    import torch  # lazily: torch takes seconds to import

    announce_kernels()
    asked, missing = kernel_mode(), not_in_force()
    out: dict[str, Any] = {"mode": NATIVE if missing else asked, "class": kernel_class(device), "cpu": cpu_model(),
                           "aten_cpu_capability": cpu_capability(), "mkl_cbwr": mkl_cbwr(),
                           "openblas_coretype": openblas_coretype(),
                           "requested": {k: os.environ.get(k) for k in sorted(PINS) if k != "ATEN_CPU_CAPABILITY"}}
    if missing:  # asked for avx2, but other kernels ran: recorded as they were
        out.update(asked=asked, not_in_force=missing)
    if replaced := replaced_settings():
        out["replaced"] = replaced
    if device.startswith("cuda"):
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        out.update(gpu=torch.cuda.get_device_name(torch.device(device)), compute_capability=f"{major}.{minor}",
                   cuda=torch.version.cuda)
    return out


def describe_environment(device: str) -> dict[str, Any]:
    """Software versions, hardware and kernels (:func:`describe_kernels`) of this run, for the provenance under
    every table."""
    from importlib.metadata import version

    import torch  # lazily: torch takes seconds to import

    if device.startswith("cuda"):
        hardware = torch.cuda.get_device_name(torch.device(device))
    else:
        hardware = f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPU threads"
    return {"device": device, "hardware": hardware, "python": platform.python_version(),
            "torch": torch.__version__, "torch_threads": torch.get_num_threads(),
            "transformers": version("transformers"), "mteb": version("mteb"),
            "platform": platform.platform(terse=True), "kernels": describe_kernels(device)}


def mkl_cbwr() -> str | None:
    """MKL's conditional-numerical-reproducibility branch in force (``OFF``: none), asked of the MKL inside
    torch; None where torch has no MKL or it cannot be asked."""
    import ctypes

    import torch  # lazily: torch takes seconds to import

    path = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    try:
        get = ctypes.CDLL(str(path)).mkl_serv_cbwr_get
    except (OSError, AttributeError):
        return None
    get.restype = ctypes.c_int
    return _MKL_CBWR.get(get(1), str(get(1)))


def openblas_coretype() -> str | None:
    """The kernels numpy's and scipy's OpenBLAS run (``Haswell``, ``SkylakeX``, ...); None without OpenBLAS.
    Chosen when each library was loaded, so asked once per process (listing the libraries takes a few ms; every
    fit's cache key names them)."""
    return _openblas_coretype()


@functools.lru_cache(maxsize=1)
def _openblas_coretype() -> str | None:
    import scipy.linalg  # noqa: F401 - scipy's own OpenBLAS is loaded before the libraries are listed
    from threadpoolctl import threadpool_info  # lazily: only where a run describes itself

    found = sorted({str(i.get("architecture")) for i in threadpool_info() if i.get("internal_api") == "openblas"})
    return "/".join(found) or None


def cpu_model() -> str:
    """``<vendor>-<family>-<model>`` of this CPU (``amd-25-17``), from ``/proc/cpuinfo``; else the machine."""
    fields = _cpuinfo()
    vendor = {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(fields.get("vendor_id", ""), fields.get("vendor_id"))
    if vendor and "cpu family" in fields and "model" in fields:
        return f"{vendor}-{fields['cpu family']}-{fields['model']}"
    return (platform.machine() or "unknown").lower()


def _pinned() -> bool:
    return kernel_mode() == AVX2 and _has_avx2() and all(
        os.environ.get(k) == v or (k in KEPT_LOWER and os.environ.get(k, "").lower() == KEPT_LOWER[k])
        for k, v in PINS.items())


def _has_avx2() -> bool:
    """An x86-64 CPU with AVX2 (where /proc/cpuinfo cannot be read, any x86-64 CPU)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    flags = _cpuinfo().get("flags")
    return flags is None or "avx2" in flags.split()


@functools.lru_cache(maxsize=1)
def _cpuinfo() -> dict[str, str]:
    """The first processor's fields of ``/proc/cpuinfo`` ({} where there is none)."""
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return {}
    out: dict[str, str] = {}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        out.setdefault(key.strip(), value.strip())
    return out
