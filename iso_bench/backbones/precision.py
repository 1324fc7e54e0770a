"""The precision iso-bench's own extraction runs a network in: chosen (``--dtype``), read from the checkpoint
(``auto``), checked against the device, and recorded in the extraction.

A precision is named as torch names it without the ``torch.`` prefix. float32 is the absent default of an
extraction record (:attr:`iso_bench.backbones.hf_backbone.Extraction.dtype` is None), so the results and caches
written before precision was recorded keep their identity; a 16-bit precision keys the cache and the setup.
Importing this module loads neither torch nor transformers.

>>> chosen_dtype("float32"), chosen_dtype("bfloat16")
(None, 'bfloat16')
"""

from __future__ import annotations

from typing import Any

from iso_bench.backbones.base import read_model_json
from iso_bench.registry import IsoBenchError

FLOAT32 = "float32"
HALF = ("bfloat16", "float16")
"""The 16-bit precisions an extraction records (float32, the default, is recorded by its absence)."""
AUTO = "auto"
DTYPES = (AUTO, FLOAT32, *HALF)
"""What ``--dtype`` offers: ``auto`` is the checkpoint's own (its ``config.json``), the others as named."""


class PrecisionError(IsoBenchError, ValueError):
    """A precision that is unknown, or that the device cannot run."""


def config_dtype(config: Any) -> str | None:
    """The dtype a ``config.json`` (parsed) records: ``dtype``, or ``torch_dtype`` as transformers 4 wrote it, at its
    top or in a multimodal model's ``text_config``, without a ``torch.`` prefix; None where it records none. The one
    parser of a checkpoint's dtype: :func:`checkpoint_dtype` turns it into the precision iso-bench runs the
    checkpoint in, :attr:`iso_bench.backbones.model_files.FilesSay.dtype` reports it as the files say it.

    >>> config_dtype({"torch_dtype": "torch.float16"}), config_dtype({"text_config": {"dtype": "bfloat16"}})
    ('float16', 'bfloat16')
    """
    config = config if isinstance(config, dict) else {}
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else {}
    name = next((c[k] for c in (config, text) for k in ("dtype", "torch_dtype") if isinstance(c.get(k), str)), None)
    return name.removeprefix("torch.") if name is not None else None


def checkpoint_dtype(model_id: str, revision: str | None = None) -> str:
    """The precision a checkpoint's ``config.json`` names (:func:`config_dtype`): bfloat16 or float16 where it
    names one, else float32 (a config that names none, or float64, is run in float32)."""
    name = config_dtype(read_model_json(model_id, "config.json", revision))
    return name if name in HALF else FLOAT32


def unrecorded_half(record: Any, dtype: str | None, checkpoint: str | None) -> str | None:
    """The 16-bit precision that vectors or a result filed under float32 may hold instead: where float32 is asked
    (``dtype`` None) and ``record``, the extraction record of a cache namespace or of a result, is iso-bench's own
    extraction (``vectors: hf``) that records a 16-bit ``precision``, or that records none (written before
    precision was recorded: transformers 5 then loaded a checkpoint in its own dtype) of a 16-bit ``checkpoint``
    (:func:`checkpoint_dtype`). None: nothing contradicts the request.

    >>> unrecorded_half({"vectors": "hf"}, None, "bfloat16"), unrecorded_half({"vectors": "hf"}, None, "float32")
    ('bfloat16', None)
    >>> unrecorded_half({"vectors": "hf", "precision": "float32"}, None, "bfloat16")
    """
    if dtype not in (None, FLOAT32) or not isinstance(record, dict) or record.get("vectors") != "hf":
        return None
    recorded = record.get("precision", record.get("dtype"))
    if recorded is not None:
        return recorded if recorded in HALF else None
    return checkpoint if checkpoint in HALF else None


def chosen_dtype(requested: str | None, model_id: str | None = None, revision: str | None = None) -> str | None:
    """The precision an extraction records for ``--dtype requested`` (None or ``auto``: the checkpoint's,
    :func:`checkpoint_dtype` of ``model_id``): None for float32, else the 16-bit name."""
    if requested is not None and requested not in DTYPES:
        raise PrecisionError(f"unknown dtype {requested!r}; choose one of {', '.join(DTYPES)}")
    name = checkpoint_dtype(model_id, revision) if requested in (None, AUTO) and model_id else requested
    return None if name in (None, AUTO, FLOAT32) else name


def torch_dtype(name: str | None) -> Any:
    """The torch dtype of an extraction's recorded precision (None: float32)."""
    import torch  # lazily: torch takes seconds to import

    return getattr(torch, name or FLOAT32)


def check_dtype_device(name: str | None, device: str | None) -> None:
    """Refuse, in one line, a 16-bit precision the device cannot compute in: bfloat16 on a GPU without it
    (before Ampere), or a precision whose matrix product and layer norm the device's kernels lack (tried on two
    tiny tensors)."""
    if name is None or name == FLOAT32:
        return
    import torch  # lazily: torch takes seconds to import

    where = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if name == "bfloat16" and where.startswith("cuda") and not torch.cuda.is_bf16_supported():
        raise PrecisionError(f"--dtype bfloat16: the GPU {where} cannot compute in bfloat16 (it needs compute "
                             "capability 8.0 or newer); use --dtype float16 or float32")
    try:
        x = torch.ones(2, 4, dtype=torch_dtype(name), device=where)
        torch.nn.functional.layer_norm(torch.nn.functional.linear(x, x), (2,))
    except (RuntimeError, TypeError) as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise PrecisionError(f"--dtype {name}: the device {where} cannot compute in {name} ({reason}); use "
                             "--dtype float32") from None
