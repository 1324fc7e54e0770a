"""Text from result files and model names is shown as written and never becomes markup: a hostile model name
(model_meta.json and its folder), task name or provenance field in markdown (headings, table cells, lists, the
plot's link), CSV and LaTeX. Ordinary names keep their bytes (the exact-output tests and the published
leaderboard check that too)."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path
from urllib.parse import unquote

import pytest

from iso_bench.report import (
    build_leaderboard,
    read_results,
    render_csv,
    render_latex,
    render_markdown,
    write_leaderboard,
)
from iso_bench.report.escape import csv_text, latex_escape, md_code, md_text, plain
from tests.report_helpers import REV, set_record, write_result

HOSTILE = {
    "script": "<script>alert(1)</script>",
    "image": "![x](http://evil/x.png)",
    "link": "[a](http://x)",
    "backticks": "``rm -rf`` `x`",
    "newline": "line1\nline2\r\n|---|---|",
    "pipe": "a|b | c",
    "mathtext": "$\\frac{$",  # GitHub's math in markdown; matplotlib's in the plot, where it would not parse
}
# how each is shown: in a heading or a list item; in a table cell; in CSV; in LaTeX
SHOWN = {
    "script": ("&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;script&gt;alert(1)&lt;/script&gt;",
               "<script>alert(1)</script>", r"\textless{}script\textgreater{}alert(1)\textless{}/script\textgreater{}"),
    "image": (r"!\[x\](http://evil/x.png)", r"!\[x\](http://evil/x.png)", "![x](http://evil/x.png)",
              "![x](http://evil/x.png)"),
    "link": (r"[a\](http://x)", r"[a\](http://x)", "[a](http://x)", "[a](http://x)"),
    "backticks": (r"\`\`rm -rf\`\` \`x\`", r"\`\`rm -rf\`\` \`x\`", "``rm -rf`` `x`", "``rm -rf`` `x`"),
    "newline": ("line1 line2 |---|---|", r"line1 line2 \|---\|---\|", "line1 line2 |---|---|",
                r"line1 line2 \textbar{}-{}-{}-\textbar{}-{}-{}-\textbar{}"),
    "pipe": ("a|b | c", r"a\|b \| c", "a|b | c", r"a\textbar{}b \textbar{} c"),
    "mathtext": (r"\$\\frac{\$", r"\$\\frac{\$", r"$\frac{$", r"\$\textbackslash{}frac\{\$"),
}
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")
CODE_SPAN = re.compile(r"(?<![\\`])(`+)(?!`).*?(?<!`)\1(?!`)")


def hostile_case(root: Path, text: str) -> Path:
    """org/<text> (raw, whiten on STS12, STSBenchmark, Isotropy-STSB) beside org/plain; <text> also in each
    result's command (an iso-bench one for whiten: a code span) and in its data repo."""
    for variant, main, command in (("raw", 0.7237, f"python run.py --model {text}"),
                                   ("whiten", 0.6547, f"iso-bench run --model {text}")):
        for task, metrics in (("STS12", None), ("STSBenchmark", None), ("Isotropy-STSB", {"sentence_isoscore": 0.3})):
            path = write_result(root, f"org/{text}", variant, task, main, metrics=metrics, command=command)
            set_record(path, data={"repo": f"hub/{text}", "revision": "r1", "source": "mirror"})
    for task in ("STS12", "STSBenchmark"):
        write_result(root, "org/plain", "raw", task, 0.7)
    return root


def tables(markdown: str) -> list[list[str]]:
    """The markdown's tables, each as its lines (consecutive lines that start with a pipe)."""
    blocks: list[list[str]] = [[]]
    for line in markdown.split("\n"):
        if line.startswith("|"):
            blocks[-1].append(line)
        elif blocks[-1]:
            blocks.append([])
    return [b for b in blocks if b]


def cells(row: str) -> list[str]:
    return [c.strip() for c in UNESCAPED_PIPE.split(row)[1:-1]]


def assert_well_formed(markdown: str) -> None:
    """Every table: a header, a delimiter row, rows of as many cells as the header; one line each."""
    assert "\r" not in markdown and not re.search("[\x00-\x09\x0b-\x1f\x7f]", markdown)
    found = tables(markdown)
    assert found
    for block in found:
        assert len(block) >= 2 and re.fullmatch(r"\|(:?-+:?\|)+", block[1]), block[1]
        for row in block:
            assert row.endswith("|") and len(cells(row)) == len(cells(block[0])), row


def assert_inert(markdown: str) -> None:
    """Outside code spans no tag, no image and no link but the plots' own ``![...](file.png)`` lines."""
    for line in markdown.split("\n"):
        text = CODE_SPAN.sub("", line)
        assert "<" not in text, line
        ours = re.fullmatch(r"!\[.*\]\([^\s()<>\[\]]+\.png\)", text)
        assert len(re.findall(r"(?<!\\)\]\(", text)) == (1 if ours else 0), line
        assert "![" not in (text[2:] if ours else text), line


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_a_hostile_model_name_and_provenance_stay_text(tmp_path: Path, kind: str) -> None:
    text, (shown, cell, in_csv, in_latex) = HOSTILE[kind], SHOWN[kind]
    root = hostile_case(tmp_path / "in", text)
    out = tmp_path / "out" / "leaderboard.md"
    written = write_leaderboard(root, out)
    markdown = out.read_text(encoding="utf-8")
    assert_well_formed(markdown)
    assert_inert(markdown)
    lines = markdown.split("\n")
    assert f"## org/{shown}" in lines  # the model's heading
    assert f"- model: org/{shown} @ {REV}" in lines  # its provenance
    assert f"  - python run.py --model {shown}" in lines  # a command: text
    assert [line for line in lines if line.startswith("  - ") and "iso-bench run --model" in line
            and CODE_SPAN.sub("", line) == "  - "]  # an iso-bench command: one code span, whole
    assert f"  - STS12: hub/{shown} @ r1 (mirror)" in lines  # its data
    comparison = tables(markdown)[-1]
    assert [cells(row)[0] for row in comparison[2:]] == [f"org/{cell}", "org/plain"]
    plots = [line for line in lines if line.startswith("![")]
    assert len(plots) == 1 and re.sub(r"(?<!\\)([\[\]])", r"\\\1", f"org/{shown}") in plots[0]  # every bracket
    target = unquote(plots[0][plots[0].rindex("](") + 2:-1])
    assert (out.parent / target).is_file() and out.parent / target in written  # the link finds its plot

    board = build_leaderboard(read_results(root), ci=False)
    rows = list(csv.reader(io.StringIO(render_csv(board))))
    assert len({len(row) for row in rows}) == 1 and len(rows) == 1 + 2 * 3 + 2 * 1 + 1 * 3 + 2 * 1
    assert {row[1] for row in rows[1:]} == {f"org/{in_csv}", "org/plain"}
    latex = render_latex(board).replace("\\allowbreak{}", "")  # where a long word may break
    assert f"\\caption{{org/{in_latex}: MTEB STS: main score $\\times$ 100 (cosine Spearman)}}" in latex
    assert f"\\textit{{model}}: org/{in_latex} @ {REV}\\par" in latex


def test_a_hostile_task_name_stays_text(tmp_path: Path) -> None:
    task = "<img src=x onerror=alert(1)>\n| *x* |"
    for variant, main in (("raw", 0.5), ("whiten", 0.25)):
        for name in (task, "STS12"):
            set_record(write_result(tmp_path, "org/alpha", variant, name, main), task_type="Retrieval")
    board = build_leaderboard(read_results(tmp_path), ci=False)
    markdown = render_markdown(board)
    assert_well_formed(markdown)
    assert_inert(markdown)
    headers = [cells(t[0]) for t in tables(markdown)]
    assert headers[1] == ["variant", r"&lt;img src=x onerror=alert(1)&gt; \| \*x\* \|"]  # MTEB Retrieval
    assert "onerror" not in markdown.replace("&lt;img src=x onerror=alert(1)&gt;", "")
    rows = list(csv.reader(io.StringIO(render_csv(board))))
    assert len({len(row) for row in rows}) == 1
    assert "<img src=x onerror=alert(1)> | *x* |" in {row[5] for row in rows}


def test_ordinary_names_and_our_own_notes_keep_their_bytes() -> None:
    ordinary = ["sentence-transformers/all-MiniLM-L6-v2+whiten-256", "n_components=null", "fit_corpus_task__seed_0",
                "cluster-pca [seeds 0-4]", "whiten [fit_corpus=train]", "82.03 [81.21, 82.84] (+1.62)",
                "(+d)* = a significant difference from raw", "Difference from raw not tested (no *) in every cell",
                "I(W): Mu & Viswanath 2018", "[low, high] after a score = its 95% interval",
                "https://huggingface.co/datasets/princeton-nlp/datasets-for-simcse/resolve/main/senteval.tar",
                "settings_sha256=74a9, prompts={\"document\": \"\"}", "org__alpha+raw/0123/STS12.json"]
    for text in ordinary:
        assert md_text(text) == md_text(text, cell=True) == md_text(text, block=True) == text
        assert csv_text(text) == text
    assert md_code("iso-bench run --tasks all") == "`iso-bench run --tasks all`"


def test_what_would_be_markup_is_escaped() -> None:
    assert md_text("*bold* and **strong**") == r"\*bold\* and \*\*strong\*\*"
    assert md_text("_it_ 2*3*4 snake_case") == r"\_it\_ 2\*3\*4 snake_case"
    assert md_text("&lt; &#60; a & b") == r"&amp;lt; &amp;\#60; a & b"
    assert md_text("[ref]: http://x [^1]: y [a][ref]") == r"[ref\]: http://x [^1\]: y [a\][ref]"
    assert md_text("# h ~~s~~ $x$ \\") == r"\# h \~\~s\~\~ \$x\$ \\"
    assert md_text("a|b") == "a|b" and md_text("a|b", cell=True) == r"a\|b"
    assert [md_text(t, block=True) for t in ("- x", "+ x", "* x", "1. x", "2) x", "---", "- -", "-- ", "***",
                                             "    code", "-x", "1.5")] == [
        r"\- x", r"\+ x", r"\* x", r"1\. x", r"2\) x", r"\---", r"\- -", r"\-- ", r"\***", "code", "-x", "1.5"]
    assert md_text("a]b[c", brackets=True) == r"a\]b\[c"
    assert plain("a\r\n\tb\x00c\u2028d\u202ee") == "a b c d e"
    assert md_code("a ``b`` c") == "```a ``b`` c```" and md_code("`x`") == "`` `x` ``"
    assert [csv_text(t) for t in ("=HYPERLINK(1)", "+1", "-1", "@SUM(A1)", "a=b", "a\nb")] == [
        "'=HYPERLINK(1)", "'+1", "'-1", "'@SUM(A1)", "a=b", "a b"]
    assert latex_escape("a\n\nb % & $ # _ { } ~ ^ \\ < > |") == (
        r"a b \% \& \$ \# \_ \{ \} \textasciitilde{} \textasciicircum{} \textbackslash{} \textless{} "
        r"\textgreater{} \textbar{}")
    assert latex_escape("[seeds …] = one row") == "{[}seeds \\dots{}] = one row"  # after \\, not read as a length
