"""The named, versioned benchmark a number belongs to: ``iso-bench v3`` (and ``v2`` and ``v1`` before it).

A benchmark version fixes what a cited number means: its tasks (the ``all`` suite: MTEB's STS tasks, the
papers' STS protocol, WiC and WSD, MTEB's Banking77Classification and SciFact, ranked; the isotropy
diagnostics, never ranked), the main score of each, the fit protocol (since v2: every fitted method in two
settings, fitted on the evaluated task's own texts and fitted on held-out texts, see :mod:`iso_bench.data.provider`;
1,000-resample bootstrap intervals), the methods, as resolved parameters (v3: the default methods and the bytes
axis, :data:`STORAGE_METHODS`), and how a token-level variant and a storage stage are made (v3: through the
model's own pooling and head). :func:`definition` writes it out and :func:`definition_sha256` names that text, so
two papers citing "iso-bench v3" cite the same protocol or can tell that they do not.

Every published version is frozen as data beside this module (``iso-bench-v1.json``: STS, WiC and WSD, fitted on
the test texts alone, without mean-proj, SHA-256 ``853d756f...``; ``iso-bench-v2.json``, ``3bf93169...``: token-level
variants pooled by a plain mean of the text's tokens, no bytes axis; ``iso-bench-v3.json``): a version's SHA-256
never changes when cards or default methods do, so results that record it stay readable and are labelled with it
on a board. :func:`current_definition` computes the definition today's cards and methods give; while it equals
v3's, iso-bench runs v3 (a test checks it). A change to a card's protocol or to a benchmark method makes them
differ, and is a new version: freeze it as a new file and name it here.

Every result records the benchmark it was run under (:func:`result_record`, in its ``iso_bench`` record):
the name, the definition's SHA-256 and whether the variant's method, fit corpus and resamples are the
benchmark's (``conforms``); a leaderboard says so per row where they are not, and never ranks such rows with
conforming ones. The benchmarks are registered with mteb as ``mteb.Benchmark`` objects once mteb's benchmark
registry is imported (:func:`iso_bench.mteb_plugin.register_benchmark`, through the same after-import hook as
the variants), so ``mteb.get_benchmark("iso-bench v3")`` returns its tasks after ``import iso_bench``.

Example:
    >>> definition()["name"], definition()["fit_corpora"], "pca-64-precision=binary" in definition()["methods"]
    ('iso-bench v3', ['task', 'held-out'], True)
    >>> "pca-64" in definition(V2)["methods"], len(definition()["methods"]), len(definition(V2)["methods"])
    (False, 43, 13)
    >>> definition_sha256(V1)[:8]
    '853d756f'
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from iso_bench.data.fit_corpus import HELD_OUT, TASK
from iso_bench.data.provider import HELD_OUT_CORPUS, HELD_OUT_RULE
from iso_bench.kinds.cards import cards
from iso_bench.methods import make_method

DEFAULT_METHODS = ("raw", "center", "clip", "abtt", "whiten", "whiten-256", "cluster-pca", "flow", "zscore", "zca",
                   "zipfian-whiten", "softdecay", "mean-proj")
"""The methods a run and a registered model use when none are named: the benchmark's without its bytes axis."""
STORAGE_METHODS = tuple(f"{spec}-precision={p}" for spec in ("raw", "center", "zscore", "whiten", "whiten-256",
                                                              "zipfian-whiten") for p in ("int8", "binary")) + tuple(
    f"{cut}-{k}{stage}" for cut in ("truncate", "pca") for k in (256, 128, 64)
    for stage in ("", "-precision=int8", "-precision=binary"))
"""The benchmark's bytes axis (since v3, ``docs/storage.md``): int8 and binary codes of raw, the centring and
whitening methods, and the first k coordinates or the top k principal directions at 256, 128 and 64 dimensions,
each also in int8 and binary. ``--methods storage`` names them, ``--methods default storage`` the benchmark's."""
METHOD_GROUPS = {"default": DEFAULT_METHODS, "storage": STORAGE_METHODS}
"""Names ``--methods`` takes for a group of specs."""
NAME = "iso-bench v3"
V2 = "iso-bench v2"
V1 = "iso-bench v1"
VERSIONS = (NAME, V2, V1)
"""Every published version, newest first."""
FROZEN = {name: Path(__file__).with_name(name.replace(" ", "-") + ".json") for name in VERSIONS}
"""Each published version's definition, frozen as data (package data of :mod:`iso_bench.results`)."""
UNRANKED_SUITES = ("isotropy",)  # diagnostics: reported, never ranked or averaged
FIT_CORPORA = (TASK, HELD_OUT)  # v2's two settings; v1 had the first alone
RESAMPLES = 1000
TOKEN_LEVEL = ("the token vectors the model's pooling reads are transformed and pooled by the model's own pooling "
               "and head (raw-level=token is raw)")
STORAGE = {"int8": "each dimension's range is the minimum and maximum of the method's transformed fit vectors (a "
                   "token-level method's pooled ones), cut into 256 buckets, values outside clipped; fitted in the "
                   "method's fit, on its fit corpus",
           "binary": "the sign of each coordinate, scored by the cosine of the +1/-1 vectors, 1 - 2H/d from the "
                     "Hamming distance H",
           "cuts": "truncate-k: the first k coordinates; pca-k: centred and projected on the top k principal "
                   "directions of the fit vectors"}
"""What v3 fixes of how its variants are made (a token-level variant; a storage stage)."""
CITATION_KEY = "isobench2026"
BIBTEX = """@software{isobench2026,
  title   = {iso-bench: which isotropy post-processing makes an encoder's embeddings better},
  author  = {{iso-bench contributors}},
  year    = {2026},
  version = {%s},
  note    = {Benchmark iso-bench %s, definition SHA-256 %s}
}"""


def definition(name: str = NAME) -> dict[str, Any]:
    """A benchmark version as data, read from its frozen file. v3 (this iso-bench's): its tasks (ranked and
    unranked, in card order, each with its main score and the source of its held-out fit corpus), both fit
    settings, every method (the defaults and the bytes axis) with its resolved parameters and level, and how
    token-level variants and storage stages are made. A copy: changing it changes nothing."""
    return json.loads(_canonical(name))


@functools.lru_cache(maxsize=len(VERSIONS))
def _canonical(name: str) -> str:
    """The canonical JSON of a definition (sorted keys, no spaces): what :func:`definition_sha256` names."""
    return json.dumps(_definition(name), sort_keys=True, separators=(",", ":"))


@functools.lru_cache(maxsize=len(VERSIONS))
def _method_specs(name: str) -> frozenset[str]:
    """The method specs a definition names: what every written result is checked against, parsed once."""
    return frozenset(definition(name)["methods"])


def _definition(name: str) -> dict[str, Any]:
    if name not in FROZEN:
        raise ValueError(f"unknown benchmark {name!r}; expected one of {', '.join(map(repr, FROZEN))}")
    return json.loads(FROZEN[name].read_text(encoding="utf-8"))


def current_definition() -> dict[str, Any]:
    """The definition today's cards and benchmark methods give, computed (not read): equal to v3's frozen one
    while nothing that v3 fixes has changed."""
    tasks = [{"task": c.name, "suite": c.suite, "kind": c.kind, "main_score": c.metric or c.group.metric,
              "ranked": c.group.ranked and c.suite not in UNRANKED_SUITES, "held_out": c.held_out} for c in cards()]
    methods = {}
    for spec in (*DEFAULT_METHODS, *STORAGE_METHODS):
        method, level = make_method(spec)
        methods[spec] = {"method": method.name, "level": level, "params": _jsonable(method.get_params())}
    return {"name": NAME, "tasks": tasks, "fit_corpora": list(FIT_CORPORA),
            "held_out": {"train": "the task's training split", HELD_OUT_CORPUS: "SemCor's sentences (the training "
                         "split of WSD-ALL)", "rule": HELD_OUT_RULE + "; equal texts removed before the fit"},
            "fit": "whole corpus (every task of the benchmark is below the fit budget)", "resamples": RESAMPLES,
            "interval": "95% percentile bootstrap", "methods": methods, "token_level": TOKEN_LEVEL,
            "storage": STORAGE}



def definition_sha256(name: str = NAME) -> str:
    """SHA-256 of the canonical JSON of :func:`definition` (sorted keys, no spaces)."""
    return hashlib.sha256(_canonical(name).encode("utf-8")).hexdigest()


def bibtex(name: str = NAME) -> str:
    """The BibTeX entry to cite a benchmark version with."""
    version = name.rsplit(" ", 1)[-1]
    return BIBTEX % (version, version, definition_sha256(name)[:12])


def result_record(spec: str, fit_corpus: str | None, resamples: int | None) -> dict[str, Any]:
    """What a result records of the benchmark: ``{"name", "definition_sha256", "conforms", "differs"}``.

    ``spec`` is the variant's canonical spec (its method's name plus every parameter that differs from its
    default, and ``-level=`` where the level is not the method's own; the run's seed is a setup, not part of
    it). The variant conforms when that spec is one of the benchmark's methods, its fit corpus (for a fitted
    method) is the benchmark's and its intervals have the benchmark's resamples; ``differs`` names what is not.

    >>> result_record("whiten-256", "held-out", 1000)["conforms"]
    True
    >>> result_record("whiten-eps=0.1", "train", 1000)["differs"]
    ['method parameters', 'fit corpus']
    """
    differs = []
    if spec not in _method_specs(NAME):
        differs.append("method parameters")
    if fit_corpus not in (None, *FIT_CORPORA):
        differs.append("fit corpus")
    if resamples not in (None, RESAMPLES):
        differs.append("resamples")
    return {"name": NAME, "definition_sha256": definition_sha256(), "conforms": not differs, "differs": differs}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, sort_keys=True, default=str))
