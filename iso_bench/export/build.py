"""Export the winner: a variant fitted exactly as ``iso-bench run`` fits it, written as a sentence-transformers
model folder that encodes texts into the variant's vectors.

The folder holds the base model's own modules (``SentenceTransformer.save`` of the pipeline the variant's raw
vectors come from) followed by the fitted post-processing:

- a sentence-level affine method (raw, center, abtt, whiten, whiten-k, zca, zscore, clip, softdecay: any
  ``x -> (x - offset) @ matrix``, :meth:`iso_bench.methods.base.Method.affine`) as sentence-transformers' own
  ``Dense`` modules with the identity activation: first the offset alone (an identity matrix, exact in
  float32, and the bias ``-offset``), then the matrix. It loads wherever sentence-transformers is installed;
- flow, cluster-pca, every token-level variant and every variant with a storage stage (``-precision=int8``,
  ``-precision=binary``: its codes as the variant scores them, the int8 ranges in its state) as an iso-bench
  module (:class:`iso_bench.export.module.PostProcessing`), which needs iso-bench installed; the record says how
  to store its vectors with sentence-transformers' ``quantize_embeddings`` (:func:`iso_bench.methods.stages.
  storage_how`).

The base pipeline's ``Normalize`` stays where it is: the variant transforms the base model's outputs (unit
vectors where the pipeline normalises) and gives mteb the transformed vectors as they are, so nothing follows
the post-processing at sentence level; a token-level variant pools its transformed token vectors and normalises
the mean where the pipeline normalises, and so does its module.

A variant of a model behind mteb's instruction wrapper (Qwen3-Embedding, gte-Qwen2, e5-mistral, ...) is refused in
one line: its raw vectors depend on each task's instruction, which a sentence-transformers folder has no place for
(its ``prompts`` are chosen by name by the caller, and mteb would not give the wrapper's instructions to them). So
is one whose pipeline carries prompts of its own (the same files given as a local folder): the guard is the
model's, not its route's. The Dense modules of a 16-bit pipeline run in its 16 bits once loaded (the record says
so, :func:`dense_precision`).

Beside the modules, in the folder: ``iso_bench_transform.npz`` (the fitted transform as plain arrays: for an
affine method ``offset`` and ``matrix``, ``y = (x - offset) @ matrix``, and for every method its learned state
by name) and ``iso_bench_transform.json`` (the fit record: base model and revision, method and resolved
parameters, fit corpus with its size and SHA-256, seed, and how the folder applies the transform).

Example:
    >>> export("sentence-transformers/all-MiniLM-L6-v2+whiten", "task:STSBenchmark", "minilm-whiten")  # doctest: +SKIP
    >>> SentenceTransformer("minilm-whiten").encode(["a cat"]).shape                               # doctest: +SKIP
    (1, 381)
"""

from __future__ import annotations

import json
import shlex
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from iso_bench._version import __version__
from iso_bench.backbones.base import model_label
from iso_bench.backbones.loader import load_backbone
from iso_bench.backbones.pool_replay import before_pooling
from iso_bench.checks import check_methods, check_seeds, describe_model, one_blas_thread
from iso_bench.data.fit_corpus import HELD_OUT, TASK, TRAIN
from iso_bench.data.provider import CorpusProvider
from iso_bench.faults import check_space
from iso_bench.files import (
    MANIFEST,
    local_name,
    manifest_differences,
    read_manifest,
    temporary_name,
    write_manifest,
)
from iso_bench.kinds.cards import held_out_sources
from iso_bench.methods import Method, make_method, storage_how
from iso_bench.outputs import output_lock, resolve_output, whole_folder
from iso_bench.registry import IsoBenchError, did_you_mean
from iso_bench.vectors.store import EmbeddingStore, default_cache_dir

STEM = "iso_bench_transform"
"""The files beside the modules: ``iso_bench_transform.npz`` (arrays) and ``iso_bench_transform.json`` (record)."""
RECORD = f"{STEM}.json"
SEPARATOR = "+"


class ExportError(IsoBenchError, ValueError):
    """An export that cannot be made as asked (the variant's name, the output folder, the model's pipeline)."""


def parse_variant(text: str) -> tuple[str, str]:
    """``"org/model+whiten-256"`` -> ``("org/model", "whiten-256")``; a local folder may stand for the model.

    >>> parse_variant("sentence-transformers/all-MiniLM-L6-v2+whiten")
    ('sentence-transformers/all-MiniLM-L6-v2', 'whiten')
    """
    model, sep, spec = text.rpartition(SEPARATOR)
    if not sep or not model or not spec:
        raise ExportError(f"{text!r} is not MODEL{SEPARATOR}SPEC: name the base model (a hub id or a local folder) "
                          f"and the method, e.g. sentence-transformers/all-MiniLM-L6-v2{SEPARATOR}whiten")
    return model, spec


def parse_fit_corpus(text: str) -> tuple[str, str | None]:
    """``(setting, task)`` of ``--fit-corpus``: ``task:NAME`` (the task's texts, as ``iso-bench run`` fits on the
    task), ``train:NAME`` (its training split), else a text file, one text per line (an existing file wins).

    >>> parse_fit_corpus("task:STSBenchmark"), parse_fit_corpus("corpus.txt")
    (('task', 'STSBenchmark'), ('corpus.txt', None))
    """
    setting, sep, name = text.partition(":")
    if sep and setting in (TASK, TRAIN, HELD_OUT) and not Path(text).is_file():
        if not name:
            raise ExportError(f"--fit-corpus {text!r} names no task; e.g. --fit-corpus {setting}:STSBenchmark")
        return setting, name
    return text, None


def check_task(name: str) -> None:
    """Refuse a task name that mteb does not know (iso-bench's own tasks are registered with it)."""
    import mteb  # lazily: mteb takes seconds to import

    try:
        mteb.get_task(name)
    except KeyError:
        known = [t.metadata.name for t in mteb.get_tasks(exclude_superseded=False)]
        raise ExportError(f"--fit-corpus: unknown task {name!r}.{did_you_mean(name, known, 0.6)} "
                          "`iso-bench list` shows iso-bench's tasks") from None


def check_output(output: str | Path, overwrite: bool = False) -> Path:
    """The folder to write for ``-o output``, checked before any work: absent, empty, or (``overwrite``) an earlier
    export holding only the files its manifest lists (:data:`iso_bench.files.MANIFEST`), unchanged; it is
    replaced only once the new one is complete. A folder holding anything else is never replaced: the refusal
    names what it holds. A symlink is followed: the folder it points to is written, the link kept. A place that
    cannot be written (a read-only or virtual file system), the working folder or one above it, and a mount point
    are refused here too (:func:`iso_bench.outputs.resolve_output`)."""
    target = resolve_output(output, ExportError)
    if target.exists() and not target.is_dir():
        raise ExportError(f"-o {output}: is a file; give a folder (new, empty, or an earlier export with --overwrite)")
    if target.is_dir() and any(target.iterdir()):
        if not overwrite:
            raise ExportError(f"-o {output}: the folder exists and is not empty; choose a new folder, or pass "
                              "--overwrite to replace an earlier export")
        files = read_manifest(target)
        if files is None:
            raise ExportError(f"-o {output}: holds files that are not an iso-bench export (no readable {MANIFEST}); "
                              "--overwrite replaces only an earlier export, so choose a new or empty folder")
        found = manifest_differences(target, files)
        if found["unexpected"] or found["changed"]:
            named = [*found["unexpected"], *(f"{n} (changed since the export)" for n in found["changed"])]
            raise ExportError(f"-o {output}: --overwrite replaces only the files an earlier export wrote, and the "
                              f"folder holds others: {', '.join(named[:8])}{', ...' * (len(named) > 8)}; move them "
                              "out or choose another folder")
    _check_writable(target, output)
    return target


def _check_writable(target: Path, output: str | Path) -> None:
    """A temporary folder can be made where ``target``'s will be (its nearest existing parent folder)."""
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise ExportError(f"-o {output}: {parent} is a file, not a folder; give a folder you can write to")
    try:
        Path(tempfile.mkdtemp(dir=parent, prefix=temporary_name(target))).rmdir()
    except OSError as exc:
        raise ExportError(f"-o {output}: cannot write in {parent} ({exc.strerror or exc}); give a folder you can "
                          "write to") from None


def export(variant: str, fit_corpus: str, output: str | Path, *, data_dir: str | Path | None = None,
           cache_dir: str | Path | None = None, device: str | None = None, seed: int = 0, batch_size: int = 32,
           revision: str | None = None, trust_remote_code: bool = False, overwrite: bool = False,
           progress: bool = True) -> dict[str, Any]:
    """Fit the variant ``MODEL+SPEC`` on ``fit_corpus`` (``task:NAME``, ``train:NAME`` or a text file) and write
    it to the folder ``output`` (see the module docstring); returns the fit record. Every input is checked
    before the model loads: the spec, the fit corpus, the output folder."""
    check_seeds([seed])
    model, spec = parse_variant(variant)
    made, level = make_method(spec)
    if level == "token" and getattr(made, "precision", None):  # the stage follows the pooling, the module precedes it
        raise ExportError(f"{variant!r}: a token-level variant with a storage stage cannot be exported whole (its "
                          "stage follows the model's pooling); export it without -precision= and store its vectors "
                          "with sentence-transformers' quantize_embeddings")
    setting, task = parse_fit_corpus(fit_corpus)
    target = check_output(output, overwrite)
    with output_lock(target, output, ExportError):  # held from this check to the swap (export_variant)
        check_output(output, overwrite)  # again, now that no other iso-bench writes it
        provider = CorpusProvider(setting, data_dir=data_dir, seed=seed, held_out_sources=held_out_sources())
        if task is None:
            provider.check()  # the file is read now
        else:
            check_task(task)
        from iso_bench.encoder import VariantEncoder, base_record  # lazily, after the checks: it imports mteb

        described = describe_model(model, revision)  # what the model is, read once
        check_methods([spec], described.dims(), model_label(model), no_tokens=described.no_tokens)
        backbone = load_backbone(model, revision, device=device, trust_remote_code=trust_remote_code,
                                 batch_size=batch_size)
        pipeline(backbone)  # refused before any text is encoded
        kinds = ("sentence", "tokens", "pool") if level == "token" else ("sentence",)
        store = EmbeddingStore(backbone, cache_dir or default_cache_dir(), kinds=kinds, batch_size=batch_size,
                               progress=progress)
        encoder = VariantEncoder(store, spec, corpus=provider, seed=seed)
        flags = [*(["--revision", revision] if revision else []), *(["--seed", str(seed)] if seed else [])]
        # recorded: local folders and files by their names, never the machine's paths (iso_bench.files.local_name)
        shown = f"{local_name(model) if Path(model).expanduser().is_dir() else model}{SEPARATOR}{spec}"
        corpus = fit_corpus if task is not None else local_name(fit_corpus)
        command = shlex.join(["iso-bench", "export", shown, "--fit-corpus", corpus, *flags, "-o",
                              local_name(output)])
        encoder.base_record = base_record(backbone, command)
        return export_variant(encoder, task, output, overwrite=overwrite)


def pipeline(backbone: Any) -> Any:
    """The SentenceTransformer that makes ``backbone``'s raw vectors; an :class:`ExportError` for a backbone
    that has none (a model mteb runs by its own ``encode``, or iso-bench's own pooling of hidden states) and for
    one behind mteb's instruction wrapper (its per-task instructions have no place in an exported folder)."""
    st = getattr(backbone, "st", None)
    if getattr(backbone, "instruct", False):
        raise ExportError(f"{backbone.model_id} is run by mteb's instruction wrapper, which puts each task's own "
                          "instruction before its texts; a sentence-transformers folder cannot carry per-task "
                          "instructions, so its variants are not exported: run them with iso-bench run")
    prompts = sorted(k for k, v in (getattr(st, "prompts", None) or {}).items() if v)
    if prompts:  # the model's own instructions, whichever route loaded it (a hub id, the same files as a folder)
        raise ExportError(f"{backbone.model_id} carries prompts ({', '.join(prompts)}) that put an instruction "
                          "before the texts they are named for; its variant is fitted on vectors of other texts "
                          "than those a caller of the exported folder would get, so its variants are not exported: "
                          "run them with iso-bench run")
    if st is None:
        how = backbone.describe()["extraction"].get("implementation") or "iso-bench's own pooling of hidden states"
        raise ExportError(f"{backbone.model_id} has no sentence-transformers pipeline to export (its vectors come "
                          f"from {how}); export a sentence-transformers model (a hub id or folder with modules.json)")
    return st


def export_variant(encoder: Any, task_name: str | None, output: str | Path, *,
                   overwrite: bool = False) -> dict[str, Any]:
    """Fit ``encoder`` (a :class:`~iso_bench.encoder.VariantEncoder`) on the corpus of ``task_name`` (None: its
    file) and write the folder ``output``, whole or not at all; returns the fit record."""
    target = check_output(output, overwrite)
    with output_lock(target, output, ExportError):  # held from this check to the swap
        return _write_export(encoder, task_name, target, output, overwrite)


def _write_export(encoder: Any, task_name: str | None, target: Path, output: str | Path,
                  overwrite: bool) -> dict[str, Any]:
    backbone = encoder.store.backbone
    st = pipeline(backbone)
    with one_blas_thread():  # fitted exactly as a run fits it (whose fits run under one BLAS thread)
        method = encoder.fitted_method(task_name)
    modules, how, arrays = post_processing(method, encoder.level, backbone)
    how.update(dense_precision(st) if how.get("as") == "dense" else {})
    record = fit_record(encoder, task_name, method, how)
    with whole_folder(target, output, lambda: check_output(output, overwrite), ExportError) as folder:
        try:
            check_space(folder)  # tests: a full disk (ISO_BENCH_FULL_DISK)
            save_pipeline(st, folder)
            append_modules(folder, modules, how.get("at"))
            from iso_bench.export.module import write_state  # lazily: it imports torch

            record["state"] = write_state(method, folder / STEM, arrays)
            (folder / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True, default=_plain) + "\n",
                                         encoding="utf-8")
            (folder / "README.md").write_text(model_card(record, target.name), encoding="utf-8")
            write_manifest(folder)
        except OSError as exc:  # said for the folder asked for, not for the temporary one
            raise OSError(exc.errno, exc.strerror, str(target)) from None
        except Exception as exc:
            if type(exc).__name__ != "SafetensorError":
                raise
            raise ExportError(f"-o {output}: cannot write the model's weights ({exc}); free space there or choose "
                              "another folder, then run the same command again") from None
    return record


def save_pipeline(st: Any, folder: Path) -> None:
    """``st.save`` into ``folder``, its tokenizer saved without the truncation and padding that the last encode
    left on the live tokenizer (a tokenizer.json that would differ between an export that encoded its texts and
    one that read them from the cache): cleared on a copy of the tokenizer's backend, the live one untouched."""
    tokenizer = getattr(st, "tokenizer", None)
    backend = getattr(tokenizer, "_tokenizer", None)
    if backend is None or not hasattr(backend, "no_truncation"):
        st.save(str(folder), create_model_card=False)
        return
    clean = type(backend).from_str(backend.to_str())
    clean.no_truncation()
    clean.no_padding()
    tokenizer._tokenizer = clean
    try:
        st.save(str(folder), create_model_card=False)
    finally:
        tokenizer._tokenizer = backend


def post_processing(method: Method, level: str, backbone: Any) -> tuple[list[Any], dict[str, Any], dict[str, Any]]:
    """``(modules, how, arrays)``: the sentence-transformers modules that follow the base pipeline, how they apply
    the fitted ``method`` (for the record), and the plain arrays of an affine map (``offset``, ``matrix``)."""
    normalized = bool(getattr(backbone.extraction, "normalize", False))
    dim = int(method.dim_) if hasattr(method, "dim_") else int(backbone.dim)
    form = method.affine() if level == "sentence" else None
    if form is not None:
        offset, matrix = form
        offset = np.zeros(dim) if offset is None else np.asarray(offset, dtype=np.float64)
        matrix = np.eye(dim) if matrix is None else np.asarray(matrix, dtype=np.float64)
        modules = dense_modules(form[0], form[1], dim)
        how = {"as": "dense", "transform": "y = (x - offset) @ matrix (iso_bench_transform.npz)",
               "input": "the base pipeline's sentence embedding" + (", normalized" if normalized else ""),
               "modules": [f"Dense({m.in_features}->{m.out_features}, bias={m.bias})" for m in modules],
               "output_dim": int(matrix.shape[1]), "needs_iso_bench": foreign_modules(backbone.st)}
        return modules, how, {"offset": offset, "matrix": matrix}
    from iso_bench.export.module import PostProcessing  # lazily: it imports torch and sentence-transformers

    st = backbone.st
    static = type(st[0]).__name__ == "StaticEmbedding"
    if level == "token":  # before the pipeline's pooling: its own pooling, Dense and Normalize follow
        before_pooling(method, method.spec, backbone)  # refused where its output cannot stand there
        module = PostProcessing(f"{method.spec}-level=token" if type(method).default_level != "token" else method.spec,
                                level="rows", static=static, output_dim=int(backbone.token_dim), method=method)
        how = {"as": "module", "transform": f"iso_bench.export.module.PostProcessing({module.spec})",
               "input": "the token vectors the base pipeline's pooling reads, in the model's coordinates; then its "
                        "own pooling and the modules after it", "at": 1,
               "modules": [f"PostProcessing({module.spec}, level=rows)"], "output_dim": int(backbone.dim),
               "needs_iso_bench": True}
        return [module], how, {}
    start, end = (0, 0) if static or level == "sentence" else special_tokens(st.tokenizer)
    output_dim = int(method.transform(np.zeros((1, dim), np.float32)).shape[1])
    module = PostProcessing(method.spec if level == type(method).default_level else f"{method.spec}-level={level}",
                            level=level, normalize=normalized and level == "token", skip_start=start, skip_end=end,
                            output_dim=output_dim, static=static and level == "token", method=method)
    what = ("the base pipeline's sentence embedding" + (", normalized" if normalized else "") if level == "sentence"
            else "the text's own token vectors (no special or prompt tokens), then their mean"
            + (", normalized" if normalized else ""))
    how = {"as": "module", "transform": f"iso_bench.export.module.PostProcessing({module.spec})", "input": what,
           "modules": [f"PostProcessing({module.spec}, level={level})"], "output_dim": output_dim,
           "needs_iso_bench": True, **storage_how(method, dim)}
    return [module], how, {}


def dense_precision(st: Any) -> dict[str, str]:
    """What the record says of the precision of the Dense modules where it is not float32: sentence-transformers
    loads every module after the first in the first's dtype, so a 16-bit pipeline's Dense modules, written in
    float32, run in its 16 bits (the transform applied to within that precision's rounding, about 1% relative
    in bfloat16, of ``iso_bench_transform.npz``'s float64 map); {} for a float32 pipeline."""
    first = next(st[0].parameters(), None) if len(st) else None
    dtype = str(first.dtype).removeprefix("torch.") if first is not None else "float32"
    if dtype == "float32":
        return {}
    return {"dtype": dtype, "precision": f"the Dense modules run in {dtype}, the base model's precision, as "
                                        "sentence-transformers loads them after it"}


def foreign_modules(st: Any) -> bool:
    """Whether the base pipeline ``st`` holds a module that is not sentence-transformers' own (an earlier export's
    iso-bench module, a model's own code): then the folder loads only with ``trust_remote_code=True``, whatever
    follows it."""
    return any(not type(m).__module__.startswith("sentence_transformers.") for m in st)


def dense_modules(offset: np.ndarray | None, matrix: np.ndarray | None, dim: int) -> list[Any]:
    """sentence-transformers ``Dense`` modules (identity activation, float32) for ``x -> (x - offset) @ matrix``:
    the offset alone first (the identity matrix and bias ``-offset``: one rounding, exact otherwise), then the
    matrix without a bias; none for the identity. Kept apart, the offset is not multiplied into a bias
    ``-offset @ matrix`` that would cancel against ``x @ matrix`` in float32."""
    import torch  # lazily: torch takes seconds to import
    from sentence_transformers.base.modules import Dense  # lazily: sentence-transformers loads torch

    modules = []
    if offset is not None and np.any(offset):
        modules.append(Dense(dim, dim, bias=True, activation_function=torch.nn.Identity(),
                             init_weight=torch.eye(dim), init_bias=torch.from_numpy(-np.float32(offset))))
    if matrix is not None:
        weight = torch.from_numpy(np.ascontiguousarray(np.asarray(matrix).T, dtype=np.float32))
        modules.append(Dense(dim, int(weight.shape[0]), bias=False, activation_function=torch.nn.Identity(),
                             init_weight=weight))
    return modules


def special_tokens(tokenizer: Any) -> tuple[int, int]:
    """How many special tokens the tokenizer adds before and after a text (``[CLS]`` and ``[SEP]``: 1 and 1),
    from its special-tokens mask of a one-word text: the tokens iso-bench's token vectors leave out."""
    if tokenizer is None:
        return 0, 0
    mask = list(tokenizer("a", return_special_tokens_mask=True).get("special_tokens_mask") or [])
    start = next((i for i, m in enumerate(mask) if not m), len(mask))
    end = next((i for i, m in enumerate(reversed(mask)) if not m), 0)
    return start, end


def append_modules(folder: Path, modules: list[Any], at: int | None = None) -> None:
    """Save ``modules`` after those of the pipeline saved in ``folder`` (or from position ``at`` on: a token-level
    variant's module before the pooling) and list them in its ``modules.json``, each by its class's import path,
    as ``SentenceTransformer.save`` lists its own."""
    path = folder / "modules.json"
    listing = json.loads(path.read_text(encoding="utf-8"))
    at = len(listing) if at is None else at
    for n, module in enumerate(modules):
        name = f"{len(listing)}_{type(module).__name__}"  # a folder of its own whatever its place
        (folder / name).mkdir()
        module.save(str(folder / name))
        listing.insert(at + n, {"idx": 0, "name": "", "path": name,
                                "type": f"{type(module).__module__}.{type(module).__name__}"})
    for idx, entry in enumerate(listing):
        entry.update(idx=idx, name=str(idx))
    path.write_text(json.dumps(listing, indent=2), encoding="utf-8")


def fit_record(encoder: Any, task_name: str | None, method: Method, how: dict[str, Any]) -> dict[str, Any]:
    """What the folder's ``iso_bench_transform.json`` records: base model and revision, the method and its
    resolved parameters, the fit corpus (size, SHA-256), the seed, and how the folder applies the transform."""
    backbone = encoder.store.backbone
    fit = encoder.fit_records.get(task_name) if task_name is not None else next(
        (r for k, r in reversed(encoder.fit_records.items()) if k == "" or k.startswith("file:")), None)
    fits = (fit or {}).get("fits") or [{}]
    return {"iso_bench_version": __version__, "variant": f"{backbone.model_id}{SEPARATOR}{encoder.spec}",
            "base_model": {"model": backbone.model_id, "revision": backbone.revision,
                           "extraction": encoder.base_record.get("extraction") or backbone.describe()["extraction"]},
            "method": {"spec": encoder.spec, "class": type(method).__name__, "level": encoder.level,
                       "params": method.get_params(), "resolved": fits[-1].get("learned", {})},
            "fit_corpus": {k: v for k, v in (fit or {"fit_corpus": None}).items() if k != "fits"},
            "fit": {k: v for k, v in fits[-1].items() if k != "learned"}, "export": how,
            "environment": encoder.base_record.get("environment"), "command": encoder.base_record.get("command")}


def model_card(record: dict[str, Any], name: str) -> str:
    """A short README.md for the folder: what it is and the two lines that load it."""
    how, corpus = record["export"], record["fit_corpus"]
    trust = ", trust_remote_code=True" if how["needs_iso_bench"] else ""
    needs = ("iso-bench installed (`pip install iso-bench`): its last module is iso-bench's" if how["needs_iso_bench"]
             else "sentence-transformers only: its last modules are sentence-transformers' own Dense")
    where = corpus.get("task") or corpus.get("path") or "no corpus (nothing to fit)"
    return (f"# {name}\n\n`{record['variant']}` exported by iso-bench {record['iso_bench_version']}: the base model "
            f"{record['base_model']['model']} (revision {record['base_model']['revision']}) followed by "
            f"{record['method']['spec']} fitted on {where} ({corpus.get('n_texts', 0)} texts, SHA-256 "
            f"{str(corpus.get('texts_sha256'))[:12]}). Needs {needs}.\n\n```python\nfrom sentence_transformers import "
            f"SentenceTransformer\nmodel = SentenceTransformer({name!r}{trust})\nvectors = model.encode(['a text'])\n"
            "```\n\nThe fit record is iso_bench_transform.json; the fitted transform, as plain arrays, "
            "iso_bench_transform.npz." + (f" Its Dense modules run in {how['dtype']}, the base model's precision "
                                          "(sentence-transformers loads them in it): they apply the transform to "
                                          f"within {how['dtype']} rounding." if how.get("dtype") else "") + "\n"
            + (f"\nStored as {how['precision']} ({how['stored_bytes']} bytes a vector): {how['store_with']}.\n"
               if "stored_bytes" in how else ""))


def _plain(value: Any) -> Any:
    """JSON for numpy's scalars and arrays (a record's learned summary holds them)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
