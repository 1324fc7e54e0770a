"""Escapes, one per output format, for every text of a leaderboard that comes from a result file or a model
name (model, task and variant names, revisions, setups, provenance, notes that quote them): such a text stays
visible and inert, it never becomes markup of the page it lands in.

- :func:`plain`: control, line-separator and bidi-override characters shown as one space (a newline in a name
  never splits a table row, a list item or a CSV row; a name never reorders the text around it);
- :func:`md_text`: GitHub markdown; ``<`` ``>`` as entities (no tag is live), ``&`` where it would start an
  entity, a backslash before ``\\`` `` ` `` ``#`` ``$`` ``~``, before ``*`` and ``_`` where they could make
  emphasis, before the brackets that could make a link, an image or a reference definition (``![``, ``](``,
  ``][``, ``]:``), before ``|`` in a table cell, and before a list marker that starts a block. Text without any
  of these (``sentence-transformers/all-MiniLM-L6-v2+whiten-256``, ``n_components=null``, ``[seeds 0-4]``,
  ``(+d)* = ...``) comes out unchanged, so ordinary leaderboards keep their bytes;
- :func:`md_code` (a code span whatever backticks the text holds), :func:`md_url` (a relative link);
- :func:`csv_text`: one line, and a leading apostrophe before ``=`` ``+`` ``-`` ``@`` so that a spreadsheet
  does not read a name as a formula;
- :func:`latex_escape`: every character LaTeX treats as markup;
- :func:`plot_text`: no ``$`` starts matplotlib's mathtext.

>>> md_text("![x](http://evil/x.png) <script>")
'!\\\\[x\\\\](http://evil/x.png) &lt;script&gt;'
>>> md_text("org/m+whiten-256"), plain("a\\r\\nb"), csv_text("=1+1")
('org/m+whiten-256', 'a b', "'=1+1")
"""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote

# C0 and C1 controls (newline, carriage return, tab, ...), DEL, line and paragraph separators, bidi controls
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]+")


def plain(text: object) -> str:
    """``text`` on one line: each run of control characters (newline, CR, tab, bidi overrides) as one space."""
    return _CONTROL.sub(" ", str(text))


# ---- markdown ---------------------------------------------------------------------------------------
_ALWAYS = {"\\": "\\\\", "`": "\\`", "#": "\\#", "$": "\\$", "~": "\\~", "<": "&lt;", ">": "&gt;"}
_ENTITY = re.compile(r"&(?=#|[A-Za-z0-9])")  # & that would start &lt; &#60; &#x3c;
_LINK = re.compile(r"(?<=!)\[|\](?=[(\[:])")  # ![ (an image), ]( ][ (a link), ]: (a reference definition)
# a list item (- + * 1. 1)) or a thematic break (*** ___; -- after our own "- ") where a block starts
_LIST_MARKER = re.compile(r"[-+*](?=\s|$)|\d{1,9}[.)](?=\s|$)|-(?=[-\s]*$)|([*_])(?=(?:\s*\1){2,}\s*$)")


def _space(ch: str) -> bool:
    return ch.isspace()


def _punct(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PS"


def _delimiters(text: str, ch: str) -> set[int]:
    """Where ``ch`` (``*`` or ``_``) could open or close emphasis, by CommonMark's flanking rules; empty when
    no run that can open has a run that can close after it (``(+d)*``, ``n_components``, ``(no *)``)."""
    runs = []
    for m in re.finditer(re.escape(ch) + "+", text):
        before = text[m.start() - 1] if m.start() else " "
        after = text[m.end()] if m.end() < len(text) else " "
        left = not _space(after) and (not _punct(after) or _space(before) or _punct(before))
        right = not _space(before) and (not _punct(before) or _space(after) or _punct(after))
        if ch == "_":  # intraword underscores never make emphasis
            left, right = left and (not right or _punct(before)), right and (not left or _punct(after))
        runs.append((m.start(), m.end(), left, right))
    opens = [start for start, _, left, _ in runs if left]
    if not opens or not any(right and start > opens[0] for start, _, _, right in runs):
        return set()
    return {i for start, end, left, right in runs if left or right for i in range(start, end)}


def md_text(text: object, *, cell: bool = False, block: bool = False, brackets: bool = False) -> str:
    r"""``text`` shown as itself in GitHub markdown, on one line; ``cell``: in a table cell (``|`` escaped);
    ``block``: where a block starts (a list item), so a leading list marker is escaped too; ``brackets``: every
    ``[`` and ``]`` escaped (the text of a link or an image, which a ``]`` would end).

    >>> md_text("`x` *a* _b_ # | [a](u)"), md_text("a|b", cell=True), md_text("- x", block=True)
    ('\\`x\\` \\*a\\* \\_b\\_ \\# | [a\\](u)', 'a\\|b', '\\- x')
    """
    text = plain(text)
    if block:
        text = text.lstrip(" ")  # a paragraph drops leading spaces anyway; four would start a code block
    emphasis = _delimiters(text, "*") | _delimiters(text, "_")
    link = {m.start() for m in _LINK.finditer(text)}
    entity = {m.start() for m in _ENTITY.finditer(text)}
    out = []
    for i, ch in enumerate(text):
        if ch in _ALWAYS:
            out.append(_ALWAYS[ch])
        elif i in entity:
            out.append("&amp;")
        elif i in emphasis or i in link or (cell and ch == "|") or (brackets and ch in "[]"):
            out.append("\\" + ch)
        else:
            out.append(ch)
    shown = "".join(out)
    marker = _LIST_MARKER.match(shown) if block else None
    if marker:
        shown = shown[:marker.end() - 1] + "\\" + shown[marker.end() - 1:]
    return shown


def md_code(text: object) -> str:
    """``text`` as a code span (shown verbatim: no markup, no tag, no entity inside is live), fenced by more
    backticks than any run it holds: ``md_code("a`b")`` is ````` ``a`b`` `````."""
    text = plain(text)
    fence = "`" * (1 + max((len(run) for run in re.findall("`+", text)), default=0))
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def md_url(name: str) -> str:
    """A file name as the target of a relative link (``(`` ``)`` spaces and ``<`` percent-encoded)."""
    return quote(name, safe="/+@")


# ---- CSV ------------------------------------------------------------------------------------------------
def csv_text(text: object) -> str:
    """A text cell of a CSV file: one line, and a leading ``'`` where a spreadsheet would read a formula."""
    text = plain(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


# ---- LaTeX ----------------------------------------------------------------------------------------------
_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
          "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
          ">": r"\textgreater{}", "|": r"\textbar{}", "−": "$-$", "–": "--", "×": r"$\times$", "±": r"$\pm$",
          "ᵀ": r"$^\top$", "†": r"$^\dagger$", "‡": r"$^\ddagger$", "°": r"$^{\circ}$", "≤": r"$\le$",
          "≥": r"$\ge$", "≠": r"$\ne$", "≈": r"$\approx$", "…": r"\dots{}", "—": "---", "→": r"$\to$",
          "·": r"$\cdot$", "’": "'", "‘": "`", "“": "``", "”": "''", "\u00a0": "~", "ß": r"\ss{}", "æ": r"\ae{}",
          "Æ": r"\AE{}", "ø": r"\o{}", "Ø": r"\O{}", "œ": r"\oe{}", "Œ": r"\OE{}", "ł": r"\l{}", "Ł": r"\L{}"}


def latex_escape(text: object) -> str:
    r"""Text safe in LaTeX: ``latex_escape("a_b × 2")`` is ``a\_b $\times$ 2``; two hyphens stay two hyphens
    (``--flag`` is ``-{}-flag``, not an en dash); on one line; a leading ``[`` braced, so that the ``\\`` before
    it does not read it as a length. The result is ASCII: the symbols a leaderboard uses (``≤ … − – † ° ‡ ±``)
    as LaTeX, a Latin letter with accents as its LaTeX accent (``é`` is ``\'{e}``), any other character as
    ``[U+XXXX]`` (pdflatex stops at a Unicode character it has not been set up for).
    """
    text = plain(text)
    shown = "".join("-{}" if ch == "-" and text[i + 1:i + 2] == "-" else _LATEX.get(ch) or _ascii(ch)
                    for i, ch in enumerate(text))
    return "{[}" + shown[1:] if shown.startswith("[") else shown


_ACCENTS = {"\u0300": "`", "\u0301": "'", "\u0302": "^", "\u0303": "~", "\u0308": '"', "\u0327": "c", "\u030c": "v",
            "\u0304": "=", "\u0306": "u", "\u030a": "r", "\u0328": "k", "\u030b": "H", "\u0307": "."}


def _ascii(ch: str) -> str:
    """A character outside :data:`_LATEX` as ASCII LaTeX: itself, an accented letter, else ``[U+XXXX]``."""
    if ch.isascii():
        return ch
    base, *marks = unicodedata.normalize("NFD", ch)
    if base.isascii() and base.isalpha() and len(marks) == 1 and marks[0] in _ACCENTS:
        return f"\\{_ACCENTS[marks[0]]}{{{base}}}"
    return f"[U+{ord(ch):04X}]"


# ---- plots ----------------------------------------------------------------------------------------------
def plot_text(text: object) -> str:
    """A label of a matplotlib figure: ``$`` shown as itself, never the start of mathtext."""
    return plain(text).replace("$", r"\$")


__all__ = ["csv_text", "latex_escape", "md_code", "md_text", "md_url", "plain", "plot_text"]
