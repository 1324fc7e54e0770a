"""The named, versioned benchmark a number belongs to: ``iso-bench v1``.

A benchmark version fixes what a cited number means: its tasks (the ``all`` suite: MTEB's STS tasks, the
papers' STS protocol, WiC and WSD, ranked; the isotropy diagnostics, never ranked), the main score of each,
the fit protocol (each fitted method fits on the evaluated task's own texts, whole-corpus; 1,000-resample
bootstrap intervals) and the method defaults, as resolved parameters. :func:`definition` writes it out and
:func:`definition_sha256` names that text, so two papers citing "iso-bench v1" cite the same protocol or can
tell that they do not.

Every result records the benchmark it was run under (:func:`result_record`, in its ``iso_bench`` record):
the name, the definition's SHA-256 and whether the variant's method, fit corpus and resamples are the
benchmark's (``conforms``); a leaderboard says so per row where they are not, and never ranks such rows with
conforming ones. The benchmark is registered with mteb as an ``mteb.Benchmark`` once mteb's benchmark registry
is imported (:func:`iso_bench.mteb_plugin.register_benchmark`, through the same after-import hook as the variants), so
``mteb.get_benchmark("iso-bench v1")`` returns its tasks after ``import iso_bench``.

Example:
    >>> definition()["name"], definition()["fit_corpus"], "whiten" in definition()["methods"]
    ('iso-bench v1', 'task', True)
"""

from __future__ import annotations

import functools
import hashlib
import json
from typing import Any

from iso_bench.kinds.cards import cards
from iso_bench.methods import make_method

DEFAULT_METHODS = ("raw", "center", "clip", "abtt", "whiten", "whiten-256", "cluster-pca", "flow", "zscore", "zca",
                   "zipfian-whiten", "softdecay")
"""The methods a run, a registered model and the benchmark use when none are named."""
NAME = "iso-bench v1"
UNRANKED_SUITES = ("isotropy",)  # diagnostics: reported, never ranked or averaged
FIT_CORPUS = "task"
RESAMPLES = 1000
CITATION_KEY = "isobench2026"
BIBTEX = """@software{isobench2026,
  title   = {iso-bench: which isotropy post-processing makes an encoder's embeddings better},
  author  = {{iso-bench contributors}},
  year    = {2026},
  version = {v1},
  note    = {Benchmark iso-bench v1, definition SHA-256 %s}
}"""


@functools.lru_cache(maxsize=1)
def definition() -> dict[str, Any]:
    """The benchmark as data: its tasks (ranked and unranked, in card order, each with its main score), the
    fit protocol and every default method with its resolved parameters and level."""
    tasks = [{"task": c.name, "suite": c.suite, "kind": c.kind, "main_score": c.group.metric,
              "ranked": c.group.ranked and c.suite not in UNRANKED_SUITES} for c in cards()]
    methods = {}
    for spec in DEFAULT_METHODS:
        method, level = make_method(spec)
        methods[spec] = {"method": method.name, "level": level, "params": _jsonable(method.get_params())}
    return {"name": NAME, "tasks": tasks, "fit_corpus": FIT_CORPUS, "fit": "whole corpus (every task of the "
            "benchmark is below the fit budget)", "resamples": RESAMPLES, "interval": "95% percentile bootstrap",
            "methods": methods}


def definition_sha256() -> str:
    """SHA-256 of the canonical JSON of :func:`definition` (sorted keys, no spaces)."""
    text = json.dumps(definition(), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def bibtex() -> str:
    """The BibTeX entry to cite this benchmark version with."""
    return BIBTEX % definition_sha256()[:12]


def result_record(spec: str, fit_corpus: str | None, resamples: int | None) -> dict[str, Any]:
    """What a result records of the benchmark: ``{"name", "definition_sha256", "conforms", "differs"}``.

    ``spec`` is the variant's canonical spec (its method's name plus every parameter that differs from its
    default, and ``-level=`` where the level is not the method's own; the run's seed is a setup, not part of
    it). The variant conforms when that spec is one of the benchmark's methods, its fit corpus (for a fitted
    method) is the benchmark's and its intervals have the benchmark's resamples; ``differs`` names what is not.

    >>> result_record("whiten-256", "task", 1000)["conforms"], result_record("whiten-eps=0.1", "train", 1000)["differs"]
    (True, ['method parameters', 'fit corpus'])
    """
    differs = []
    if spec not in definition()["methods"]:
        differs.append("method parameters")
    if fit_corpus not in (None, FIT_CORPUS):
        differs.append("fit corpus")
    if resamples not in (None, RESAMPLES):
        differs.append("resamples")
    return {"name": NAME, "definition_sha256": definition_sha256(), "conforms": not differs, "differs": differs}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))
