"""The settings digest of mteb's models is what their settings are, the same in every process: a function among
a loader's arguments (gte-Qwen2's ``instruction_template``) is named by its module and qualified name, never by
its address; settings without a function keep the digest they always had (published caches and results)."""

from __future__ import annotations

import functools
import hashlib
import json
import subprocess
import sys

from iso_bench.backbones.pipeline import settings_digest, stable_name

DIGESTS = """
import json, sys
from mteb.models.model_implementations import MODEL_REGISTRY
from iso_bench.backbones.pipeline import settings_digest
out = {}
for name, meta in sorted(MODEL_REGISTRY.items()):
    settings = {k: v for k, v in (meta.loader_kwargs or {}).items() if k not in ("model_prompts", "device")}
    out[name] = [settings_digest("impl", settings), any(callable(v) and not isinstance(v, type)
                                                        for v in settings.values())]
json.dump(out, sys.stdout)
"""


def _digests() -> dict[str, list]:
    run = subprocess.run([sys.executable, "-c", DIGESTS], check=True, capture_output=True, text=True)
    return json.loads(run.stdout)


def test_every_registry_model_with_a_function_in_its_settings_digests_alike_in_two_processes() -> None:
    first, second = _digests(), _digests()
    with_function = sorted(name for name, (_, has) in first.items() if has)
    assert len(with_function) >= 40  # mteb 2.26: 51 models (gte-Qwen2, NV-Embed, GritLM, ...)
    assert "Alibaba-NLP/gte-Qwen2-1.5B-instruct" in with_function
    moved = [name for name in first if first[name][0] != second[name][0]]
    assert not moved, f"settings digests that differ between two processes: {moved[:5]}"


def test_settings_without_a_function_keep_the_digest_they_always_had() -> None:
    from mteb.models.model_implementations import MODEL_REGISTRY

    kept = 0
    for meta in MODEL_REGISTRY.values():
        settings = {k: v for k, v in (meta.loader_kwargs or {}).items() if k not in ("model_prompts", "device")}
        if any(callable(v) and not isinstance(v, type) for v in settings.values()):
            continue
        old = json.dumps({"implementation": "impl", "settings": settings, "modules": (), "default_prompt": None},
                         sort_keys=True, default=str)  # the digest of iso-bench before stable names
        assert settings_digest("impl", settings) == hashlib.sha256(old.encode()).hexdigest(), meta.name
        kept += 1
    assert kept > 800


def _nested(n: int):
    def inner(x: int) -> int:
        return x + n

    return inner


def test_stable_names_of_functions_partials_and_nested_functions() -> None:
    assert stable_name(json.dumps) == "json.dumps"
    assert stable_name(functools.partial(json.dumps, indent=2)) == 'partial(json.dumps, [[], {"indent": 2}])'
    name = stable_name(_nested(1))
    assert name.startswith("tests.test_settings_digest._nested.<locals>.inner:sha256=") or name.startswith(
        "test_settings_digest._nested.<locals>.inner:sha256=")
    assert " at 0x" not in name and name == stable_name(_nested(2))  # the same source: the same identity
    assert stable_name("float16") == "float16" and stable_name(int) == "<class 'int'>"
