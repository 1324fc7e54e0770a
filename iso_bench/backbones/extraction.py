"""How raw vectors are read from a network's hidden states: the :class:`Extraction` record (pooling, layer,
normalisation, window, batching, precision) that keys every cache folder and result, the model's usual extraction
read from its sentence-transformers files, and what of a folder's pipeline iso-bench's own extraction would not
replay. Importing this module loads neither torch nor transformers (the command line reads :data:`POOLINGS`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from iso_bench.backbones.base import EQUAL_LENGTH, PADDED, POLICIES, read_model_json
from iso_bench.backbones.precision import FLOAT32, HALF
from iso_bench.registry import IsoBenchError

POOLINGS = ("mean", "cls", "first-last-avg", "last-token")
"""The sentence poolings :class:`Extraction` accepts (``--pooling`` offers these)."""


class ExtractionError(IsoBenchError, ValueError):
    """Extraction settings that no model can honour (an unknown pooling, a too small ``max_length``)."""


@dataclass(frozen=True)
class Extraction:
    """How raw vectors are read from the network; part of every cache key and result record.

    ``layer`` indexes ``hidden_states`` as Hugging Face returns them (0 is the embedding layer, -1 the
    last layer). ``first-last-avg`` ignores ``layer`` and averages ``hidden_states[1]`` and
    ``hidden_states[-1]``. ``normalize`` scales sentence vectors to unit length, as a
    sentence-transformers model with a Normalize module does. ``batching`` is the batching policy
    (:func:`iso_bench.backbones.base.plan_batches`): :data:`~iso_bench.backbones.base.EQUAL_LENGTH` unless results
    written under the old :data:`~iso_bench.backbones.base.PADDED` policy are to be reproduced. ``last-token`` takes
    each text's last real token (the attention mask's last 1). ``dtype`` is the precision the network runs in,
    ``"bfloat16"`` or ``"float16"``; None is float32 (``"float32"`` is stored as None), so records and cache
    folders of float32 extractions are those written before precision was recorded.
    """

    pooling: str = "mean"
    layer: int = -1
    normalize: bool = False
    max_length: int = 512
    batching: str = EQUAL_LENGTH
    dtype: str | None = None

    def __post_init__(self) -> None:
        if self.dtype == FLOAT32:
            object.__setattr__(self, "dtype", None)  # float32: the absent default
        if self.dtype is not None and self.dtype not in HALF:
            raise ExtractionError(f"unknown dtype {self.dtype!r}; choose one of {FLOAT32}, {', '.join(HALF)}")
        if self.pooling not in POOLINGS:
            raise ExtractionError(f"unknown pooling {self.pooling!r}; choose one of {', '.join(POOLINGS)}")
        if self.max_length < 2:
            raise ExtractionError(f"max_length must be at least 2, got {self.max_length}")
        if self.batching not in POLICIES:
            raise ExtractionError(f"unknown batching policy {self.batching!r}; choose one of {', '.join(POLICIES)}")

    def key(self) -> str:
        """A short stable name for cache folders."""
        layer = "fl" if self.pooling == "first-last-avg" else f"L{self.layer}"
        norm = "-norm" if self.normalize else ""
        batching = "" if self.batching == PADDED else f"-{self.batching}"  # padded: the folders of iso-bench 0.1
        dtype = f"-{self.dtype}" if self.dtype else ""  # float32: the folders written before precision was recorded
        return f"{self.pooling}-{layer}{norm}-max{self.max_length}{batching}{dtype}"

    def to_dict(self) -> dict[str, Any]:
        """The record's fields; ``dtype`` only where it is not float32."""
        out = asdict(self)
        if out["dtype"] is None:
            del out["dtype"]
        return out


def default_extraction(model_id: str, revision: str | None = None, modules: Any = None) -> Extraction:
    """The model's usual pooling: its sentence-transformers configuration when it has one (``modules``: its
    ``modules.json`` where already read: CLS, last-token or else mean pooling, Normalize), else mean pooling over the
    last layer without normalisation."""
    modules = modules if modules is not None else read_model_json(model_id, "modules.json", revision) or []
    pooling, normalize = "mean", False
    for module in modules if isinstance(modules, list) else []:
        kind = str(module.get("type", ""))
        if kind.endswith("Pooling"):
            cfg = read_model_json(model_id, f"{module.get('path', '')}/config.json".lstrip("/"), revision) or {}
            if cfg.get("pooling_mode_cls_token"):
                pooling = "cls"
            elif cfg.get("pooling_mode_lasttoken"):
                pooling = "last-token"
        elif kind.endswith("Normalize"):
            normalize = True
    st_cfg = read_model_json(model_id, "sentence_bert_config.json", revision) or {}
    max_length = int(st_cfg.get("max_seq_length", 512)) if isinstance(st_cfg, dict) else 512
    return Extraction(pooling=pooling, normalize=normalize, max_length=max_length)


SAME_POOLING = {"cls_token": "cls", "mean_tokens": "mean", "lasttoken": "last-token"}
"""The sentence-transformers Pooling modes that iso-bench's own poolings replay exactly."""


def unreplayable(model_id: str, revision: str | None = None, modules: Any = None) -> str | None:
    """What of a sentence-transformers folder's pipeline (``modules``: its ``modules.json``) iso-bench's own
    extraction of a layer would not replay: a Pooling mode other than one :data:`SAME_POOLING` maps (max,
    weightedmean, mean_sqrt_len, several at once), or a Dense head; None where it replays the pipeline."""
    for module in modules if isinstance(modules, list) else []:
        kind = str(module.get("type", ""))
        if kind.endswith("Dense"):
            return "a Dense head"
        if kind.endswith("Pooling"):
            cfg = read_model_json(model_id, f"{module.get('path', '')}/config.json".lstrip("/"), revision) or {}
            modes = ([f"{cfg['pooling_mode']}"] if isinstance(cfg.get("pooling_mode"), str) else
                     [k.removeprefix("pooling_mode_") for k, v in cfg.items() if k.startswith("pooling_mode_") and v])
            modes = [{"cls": "cls_token", "mean": "mean_tokens"}.get(m, m) for m in modes]
            if len(modes) > 1 or (modes and modes[0] not in SAME_POOLING):
                return f"{'+'.join(m.removesuffix('_tokens') for m in modes)} pooling"
    return None
