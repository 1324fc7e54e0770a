"""Every snippet, path and link of README.md, the pages it links (docs/, benchmarks/README.md) and
leaderboards/README.md works as written. The snippets are found wherever they sit (fenced code blocks), so the
pages can be reorganised freely: the commands that can run here
run (``iso-bench list``, every ``iso-bench run`` as a dry-run, ``iso-bench leaderboard``, ``iso-bench cache
list``), the ``ResultCache`` snippets load the published results, and the rest is parsed (every ``iso-bench``
command by the real parser; pip, Slurm, GPU and hub commands, Python and JSON); every repository and data path
exists, and every results path matches the published results' layout."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import iso_bench.cli as cli
import iso_bench.cli.arguments as cli_arguments
from tests.report_helpers import small_case

from .conftest import MINILM, PUBLISHED_RESULTS, SHARED_DATA

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = (README, ROOT / "docs" / "cluster.md", ROOT / "docs" / "results.md", ROOT / "docs" / "reproducibility.md",
         ROOT / "docs" / "layout.md", ROOT / "docs" / "models.md", ROOT / "docs" / "decoders.md",
         ROOT / "docs" / "storage.md", ROOT / "benchmarks" / "README.md")  # the user's pages: paths from a checkout
BOARD_README = ROOT / "leaderboards" / "README.md"  # the published folder's page: paths from the published folder
READMES = (*PAGES, BOARD_README)
PUBLISHED = ROOT / "leaderboards"  # the published board; its results are PUBLISHED_RESULTS / "results"
SHELL = {"python3", "python", "pip", "export", "bash", ".", "git"}  # what else a bash block may run: parsed, not run


@dataclass(frozen=True)
class Block:
    readme: Path
    line: int
    lang: str
    text: str


def blocks() -> list[Block]:
    """Every fenced code block of the pages, wherever it sits."""
    out = []
    for readme in READMES:
        text = readme.read_text(encoding="utf-8")
        for m in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            out.append(Block(readme, text[:m.start()].count("\n") + 1, m.group(1), m.group(2)))
    return out


def commands(block: Block) -> list[list[str]]:
    """The commands of a bash block as argv lists: continuation lines joined, comments dropped, environment
    assignments in front of a command left out."""
    joined = re.sub(r"\\\n\s*", " ", block.text)
    out = []
    for line in joined.splitlines():
        for part in re.split(r"\s&&\s", line):
            argv = shlex.split(part, comments=True)
            while argv and re.fullmatch(r"[A-Z_]+=\S*", argv[0]):
                argv = argv[1:]
            if argv:
                out.append(argv)
    return out


def iso_bench_commands(*pages: Path) -> list[list[str]]:
    return [argv[1:] for b in blocks() if b.lang == "bash" and b.readme in pages for argv in commands(b)
            if argv[0] == "iso-bench"]


def test_every_snippet_is_a_kind_this_test_checks() -> None:
    found = blocks()
    assert {b.lang for b in found} <= {"bash", "python", "json", ""}, {b.lang for b in found}
    assert sum(b.readme == BOARD_README for b in found) >= 2 and len(found) >= 10
    assert {b.readme for b in found} >= {README, BOARD_README, ROOT / "docs" / "cluster.md"}
    for b in (b for b in found if b.lang == "bash"):
        for argv in commands(b):
            assert argv[0] == "iso-bench" or argv[0] in SHELL, (b.readme.name, b.line, argv)


@pytest.fixture()
def any_device(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--device cuda`` parses on a machine without a GPU too (the commands are for a GPU cluster)."""
    monkeypatch.setattr(cli_arguments, "check_device", lambda device: device)  # where --device is parsed


def test_every_iso_bench_command_parses(any_device: None) -> None:
    parser = cli.build_parser()
    for readme in READMES:
        for argv in iso_bench_commands(readme):
            args = parser.parse_args([a.replace("DATA", str(SHARED_DATA)) for a in argv])
            assert args.func is not None, argv


def run_main(argv: list[str]) -> str:
    """``iso-bench argv`` in this process: its standard output, after checking it succeeded."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(argv) == 0, argv
    return out.getvalue()


@pytest.fixture()
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A working folder as the README assumes: ``../shared`` beside it, a results folder and a fit corpus file
    (``wiki-sentences.txt``) of the user's own."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is not available")
    (tmp_path / "shared").symlink_to(SHARED_DATA.parent)
    folder = tmp_path / "checkout"
    small_case(folder / "results")
    (folder / "wiki-sentences.txt").write_text("A sentence of Wikipedia.\nAnother one.\n", encoding="utf-8")
    monkeypatch.chdir(folder)
    monkeypatch.delenv("ISO_BENCH_DATA_DIR", raising=False)
    (tmp_path / "vectors").mkdir()  # the raw-vector cache, empty
    monkeypatch.setenv("ISO_BENCH_CACHE", str(tmp_path / "vectors"))
    return folder


def test_the_readme_commands_that_can_run_here_run(checkout: Path, any_device: None) -> None:
    """list, every run as a dry-run (the plan: no model loaded, nothing written), the leaderboards of the
    user's results folder, the cache listing; outliers and cache pruning parse only (a model, a real cache)."""
    ran = []
    for argv in iso_bench_commands(*PAGES):
        if argv[0] == "run":
            out = run_main([*argv, *([] if "--dry-run" in argv else ["--dry-run"])])
            assert out.startswith("plan: "), out
        elif argv[0] in ("list", "leaderboard") or argv[:2] == ["cache", "list"]:
            run_main(argv)
        else:
            continue
        ran.append(argv[0])
    assert ran.count("run") >= 8 and ran.count("leaderboard") >= 3 and "list" in ran, ran
    assert (checkout / "leaderboard.md").is_file() and (checkout / "site" / "index.html").is_file()
    assert (checkout / "leaderboard.tex").read_text().startswith("\\documentclass")


def test_the_published_folders_commands_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, published_computed,
                                           published_results: Path) -> None:
    """leaderboards/README.md: the run (one part of the regeneration: all-MiniLM-L6-v2 fitted on test texts) as
    a dry-run finds that part's published results without any data; the leaderboard commands, run in a copy, write
    the committed files byte for byte. The commands read every published result file; the board's intervals, paired
    tests and per-budget lines are the session's computation of those files (``published_computed``, which
    tests/test_published_leaderboard.py checks), not computed again."""
    from huggingface_hub import snapshot_download

    import iso_bench.report

    def computed(results_dir, accept_modified=False, ci=True):
        assert Path(results_dir).resolve() == (tmp_path / "leaderboards" / published_results.name).resolve()
        assert ci and not accept_modified
        return published_computed

    monkeypatch.setattr(iso_bench.report, "compute_leaderboard", computed)
    argv = iso_bench_commands(BOARD_README)
    runs = [a for a in argv if a[0] == "run"]
    boards = [a for a in argv if a[0] == "leaderboard" and a[1] == f"leaderboards/{published_results.name}"]
    earlier = [a for a in argv if a[0] == "leaderboard" and a not in boards]  # v2's, after its units' restore
    assert len(runs) == 1 and len(boards) == 3 and [a[1] for a in earlier] == ["leaderboards/v2"]
    monkeypatch.chdir(ROOT)
    monkeypatch.delenv("ISO_BENCH_DATA_DIR", raising=False)
    try:
        snapshot_download(MINILM, local_files_only=True)
    except Exception:  # noqa: BLE001
        pytest.skip(f"{MINILM} is not in the Hugging Face cache")
    placeholders = {"DATA": str(SHARED_DATA), "MODEL": MINILM, "SETTING": "task"}
    plan = run_main([*(placeholders.get(a, a) for a in runs[0]), "--dry-run"])
    minilm = [line for line in plan.splitlines() if line.startswith(MINILM)]  # a task: "STS12  [iso-bench v3]"
    done = [int(re.search(r"\s(\d+)/\d+\s", line).group(1)) for line in minilm]
    # every variant of the part on every task, but cluster-pca's isotropy diagnostic for seeds 2-4 (one token
    # vector at zero: leaderboards/v3/README.md), which a run tries again
    assert len(minilm) == 19 and done == [51] * 18 + [48] and minilm[-1].split()[1] == "Isotropy-STSB"
    (tmp_path / "leaderboards" / published_results.name).mkdir(parents=True)
    (tmp_path / "leaderboards" / published_results.name / "results").symlink_to(published_results / "results")
    monkeypatch.chdir(tmp_path)
    for board in boards:
        run_main(board)
    written = sorted(p.name for p in (tmp_path / "leaderboards").iterdir() if p.is_file())
    assert {"leaderboard.md", "index.html", "leaderboard.tex", "leaderboard-budget.md"} <= set(written), written
    for name in written:
        assert (tmp_path / "leaderboards" / name).read_bytes() == (PUBLISHED / name).read_bytes(), name


def python_blocks() -> list[Block]:
    return [b for b in blocks() if b.lang == "python"]


def test_every_python_snippet_compiles_and_the_result_cache_ones_load_the_published_results(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snippets = python_blocks()
    for b in snippets:
        compile(b.text, f"{b.readme.name}:{b.line}", "exec")
    readers = [b for b in snippets if "ResultCache(" in b.text and "load_results(" in b.text]
    assert {b.readme for b in readers} == {README, BOARD_README}
    (tmp_path / "results").symlink_to(PUBLISHED_RESULTS)  # README.md reads the user's ./results: the published one
    published = [p for p in (PUBLISHED_RESULTS / "results").rglob("*.json") if p.name != "model_meta.json"]
    for b in readers:
        monkeypatch.chdir(ROOT if b.readme == BOARD_README else tmp_path)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(b.text, f"{b.readme.name}:{b.line}", "exec"), {})  # noqa: S102 - the README's own code
        printed = out.getvalue().splitlines()
        if b.readme == BOARD_README:  # every published result file, as the snippet's comment says
            assert printed == [str(len(published))] == re.findall(r"# (\d+)$", b.text, re.M), printed
        else:
            assert len(printed) == len(published) and all(re.match(r"\S+/\S+\+\S+ ", p) for p in printed)


@pytest.mark.slow
def test_the_get_model_snippet_runs(tmp_path: Path) -> None:
    """README.md's ``mteb.get_model`` + ``mteb.evaluate`` example, as written, with mteb's result cache in a
    temporary folder (``MTEB_CACHE``) and the data directory of the tests."""
    (snippet,) = [b for b in python_blocks() if "mteb.get_model(" in b.text]
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is not available")
    env = {**os.environ, "MTEB_CACHE": str(tmp_path / "mteb"), "ISO_BENCH_DATA_DIR": str(SHARED_DATA),
           "HF_HUB_OFFLINE": "1", "HF_DATASETS_CACHE": str(tmp_path / "datasets")}
    code = snippet.text + "\nprint(result.task_results[0].get_score())\n"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    assert 0.7 < float(done.stdout.splitlines()[-1]) < 0.9
    assert list((tmp_path / "mteb").rglob("STSBenchmark.json"))  # written where mteb writes every result


def test_the_json_and_shell_snippets_are_what_they_say() -> None:
    for b in (b for b in blocks() if b.lang == "json"):
        text = b.text.strip()
        json.loads(text if text.startswith("{") else "{" + text + "}")
    project = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    section = project.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    extras = set(re.findall(r"^([\w-]+)\s*=", section, re.M))
    for b in (b for b in blocks() if b.lang == "bash"):
        for argv in commands(b):
            if argv[:3] == ["pip", "install", "-e"]:
                assert set(re.search(r"\[(.*)\]", argv[3]).group(1).split(",")) <= extras, argv
            if argv[0] == "bash":
                script = ROOT / argv[1]
                if SHARED_DATA.is_dir():
                    assert script.is_file() and all(flag in script.read_text() for flag in argv[2:]), argv


# ---- paths ------------------------------------------------------------------------------------------------
RUNTIME = re.compile(r"^(~/|<cache>/|<results>/grid/|\./results$|\.\./shared$|submission/|models/)")  # made by a run
RESULTS = re.compile(r"^(DIR|\./results|results|<model>|v[23]/results)")  # a --results folder, or mteb's ResultCache


def inline_paths(readme: Path) -> list[str]:
    """The code spans outside the code blocks that are paths: a ``/`` and no space."""
    text = re.sub(r"^```.*?^```", "", readme.read_text(encoding="utf-8"), flags=re.S | re.M)
    spans = re.findall(r"`([^`\n]+)`", text)
    return sorted({s for s in spans if "/" in s and " " not in s and not s.startswith(("--", "http"))})


def published_glob(readme: Path, path: str) -> str:
    """A documented results path as a glob over the published folder (a ``--results`` folder), ``<x>`` and
    ``...`` matching anything. The user's pages name the ``--results`` folder first (``DIR``, ``./results``; a path
    from ``<model>`` is under mteb's cache's ``results/``); leaderboards/README.md is in the published folder,
    its results under ``v2/``."""
    if readme != BOARD_README:  # relative to the published results folder
        path = "results/" + path if path.startswith("<model>") else re.sub(r"^(\./results|DIR|results)/", "", path)
    return re.sub(r"<[^>]+>", "*", path).replace("...", "**")


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_path_exists_or_matches_the_published_layout(readme: Path) -> None:
    checked = 0
    for path in inline_paths(readme):
        if RUNTIME.match(path) or re.fullmatch(r"[\w.-]+/[\w.-]+(\+[\w=.,-]+)?", path) and "+" in path or path in (
                MINILM, "sentence-transformers/all-mpnet-base-v2", "local/static-all-MiniLM-L6-v2"):
            continue  # made by a run; a model or variant name
        if RESULTS.match(path):
            base = PUBLISHED if readme == BOARD_README else PUBLISHED_RESULTS
            assert any(base.glob(published_glob(readme, path))), path  # as the published results lie
        elif path.startswith("<dir>/"):
            if SHARED_DATA.is_dir():
                shown = path.replace("<dir>/", "").replace("{STS,SICK}", "STS")
                assert any(SHARED_DATA.glob(re.sub(r"<[^>]+>", "*", shown))), path  # the data folder's layout
        else:
            assert (readme.parent / path).exists() or (ROOT / path).exists(), path  # a file of the repository
        checked += 1
    assert checked >= {README: 10, BOARD_README: 3}.get(readme, 1)


def anchor(heading: str) -> str:
    """GitHub's anchor of a markdown heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_reaches_a_file_and_heading(readme: Path) -> None:
    """A relative link ``[text](path#anchor)`` names a file of the repository and, with an anchor, one of its
    headings: pages moved or sections renamed leave no dead link."""
    text = re.sub(r"^```.*?^```", "", readme.read_text(encoding="utf-8"), flags=re.S | re.M)
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    local = [link for link in links if not re.match(r"[a-z]+://", link)]
    for link in local:
        path, _, fragment = link.partition("#")
        target = (readme.parent / path).resolve() if path else readme
        assert target.exists(), (readme.name, link)
        if fragment and target.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", target.read_text(encoding="utf-8"), re.M)
            assert fragment in {anchor(h) for h in headings}, (readme.name, link)
    assert readme == BOARD_README or len(local) >= 1


def test_the_readme_reads_in_300_lines_and_its_answer_is_the_published_boards_matrix() -> None:
    readme = README.read_text(encoding="utf-8")
    board = (PUBLISHED / "leaderboard.md").read_text(encoding="utf-8")
    matrix = board[board.index("**Fitted on test texts**"):board.index("Each cell: ")].rstrip()
    assert matrix.count("| encoder ") == 2 and matrix in readme  # rendered again from the results: the same text
    assert len(readme.splitlines()) <= 300
