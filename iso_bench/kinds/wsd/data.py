"""Word sense disambiguation data: the Raganato et al. (2017) corpora and WordNet 3.0's sense index.

The unified evaluation framework ships every corpus as ``<name>.data.xml`` (``<corpus><text><sentence id>``
with ``<wf lemma pos>word</wf>`` and ``<instance id lemma pos>word</instance>`` children) plus
``<name>.gold.key.txt`` (``instance_id key1 [key2 ...]``). :func:`load_corpus` reads both into a
:class:`WSDCorpus`: each sentence's text (its word forms joined by single spaces) and each instance's
character span in that text, so an encoder can pool the sub-tokens of exactly that span.

Malformed input raises :class:`WSDDataError` naming the file and line; nothing is skipped, so nothing is
ever scored from a partial read. WordNet senses come straight from ``index.sense`` (no nltk needed).

Example:
    >>> wn = WordNetSenses.from_index("nltk_data/corpora/wordnet")                  # doctest: +SKIP
    >>> corpus = load_corpus(*framework_paths("WSD_Evaluation_Framework", "ALL"), wordnet=wn)  # doctest: +SKIP
    >>> inst = corpus.instances[0]                                                   # doctest: +SKIP
    >>> corpus.sentences[inst.sentence_id][inst.start:inst.end], wn.first_sense(inst.lemma, inst.pos)  # doctest: +SKIP
    ('art', 'art%1:06:00::')
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, NoReturn
from xml.parsers import expat

from iso_bench.data.mirror_check import DataFormatError
from iso_bench.files import read_lines

POS_TAGS = ("NOUN", "VERB", "ADJ", "ADV")
"""The framework's part-of-speech tags of sense-tagged instances."""

SS_TYPE_POS = {"1": "NOUN", "2": "VERB", "3": "ADJ", "4": "ADV", "5": "ADJ"}
"""Sense-key ``ss_type`` -> POS tag; 5 (satellite adjective) is an adjective."""

EVALUATION_SETS = ("senseval2", "senseval3", "semeval2007", "semeval2013", "semeval2015", "ALL")


class WSDDataError(DataFormatError):
    """A WSD corpus, key file or WordNet index is malformed; the message starts with ``file:line``."""


class Instance(NamedTuple):
    """One sense-tagged word: ``sentence_text[start:end]`` is its surface form."""

    id: str
    sentence_id: str
    lemma: str
    pos: str
    start: int
    end: int


@dataclass
class WSDCorpus:
    """A Raganato-format corpus: sentence texts, instances in document order, gold keys per instance id."""

    name: str
    sentences: dict[str, str]
    instances: list[Instance]
    gold: dict[str, tuple[str, ...]]
    paths: tuple[str, str] = field(default=("", ""))  # the .data.xml and .gold.key.txt it was read from

    def __len__(self) -> int:
        return len(self.instances)

    def gold_keys(self) -> list[tuple[str, ...]]:
        """The gold keys of every instance, in the order of :attr:`instances` (rows of a vector matrix)."""
        return [self.gold[inst.id] for inst in self.instances]


def normalize_lemma(lemma: str) -> str:
    """The lemma as sense keys spell it: lowercase, words joined by ``_`` (``Change ringing`` -> ``change_ringing``)."""
    return "_".join(lemma.lower().split())


class WordNetSenses:
    """WordNet 3.0 senses by (lemma, POS), read from ``index.sense``, each list ordered by sense number.

    The first key of :meth:`candidates` is "the WordNet first sense" (senses are numbered by their
    tagged frequency, so it is WordNet's most frequent sense). Satellite adjectives count as ``ADJ``.

    Example:
        >>> wn = WordNetSenses({("bank", "NOUN"): ("bank%1:17:01::", "bank%1:14:00::")})
        >>> wn.first_sense("Bank", "NOUN"), "bank%1:14:00::" in wn
        ('bank%1:17:01::', True)
    """

    def __init__(self, senses: Mapping[tuple[str, str], tuple[str, ...]]) -> None:
        self._senses = dict(senses)
        self._keys = {key for keys in self._senses.values() for key in keys}

    @classmethod
    def from_index(cls, path: str | Path) -> WordNetSenses:
        """Read ``index.sense`` (or the folder holding it): lines ``sense_key offset sense_number tag_cnt``."""
        path = Path(path)
        if path.is_dir():
            path = path / "index.sense"
        numbered: dict[tuple[str, str], list[tuple[int, str]]] = {}
        for lineno, line in enumerate(read_lines(path, WSDDataError), 1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) != 4 or not parts[2].isdigit():
                raise WSDDataError(f"{path}:{lineno}: expected 'sense_key offset sense_number tag_cnt', "
                                   f"got {line.strip()!r}")
            key = parts[0]
            lemma, pos = _split_key(key, f"{path}:{lineno}")
            numbered.setdefault((lemma, pos), []).append((int(parts[2]), key))
        return cls({lp: tuple(key for _, key in sorted(keys)) for lp, keys in numbered.items()})

    def candidates(self, lemma: str, pos: str) -> tuple[str, ...]:
        """The sense keys of ``lemma`` as ``pos`` (a framework tag), first sense first; ``()`` if none."""
        return self._senses.get((normalize_lemma(lemma), pos), ())

    def first_sense(self, lemma: str, pos: str) -> str | None:
        """WordNet's first sense of ``lemma`` as ``pos``, or None when WordNet does not have it."""
        keys = self.candidates(lemma, pos)
        return keys[0] if keys else None

    def __contains__(self, key: object) -> bool:
        return key in self._keys

    def __len__(self) -> int:
        return len(self._keys)


def _split_key(key: str, where: str) -> tuple[str, str]:
    """(lemma, POS) of a sense key ``lemma%ss_type:lex_filenum:lex_id:head_word:head_id``."""
    lemma, sep, rest = key.rpartition("%")
    fields = rest.split(":")
    if not sep or not lemma or len(fields) != 5 or fields[0] not in SS_TYPE_POS:
        raise WSDDataError(f"{where}: malformed sense key {key!r}")
    return lemma, SS_TYPE_POS[fields[0]]


def framework_paths(root: str | Path, name: str) -> tuple[Path, Path]:
    """The data and gold files of one corpus in an unpacked ``WSD_Evaluation_Framework`` folder.

    ``name`` is one of :data:`EVALUATION_SETS` or ``"semcor"``.
    """
    root = Path(root)
    if name.lower() == "semcor":
        folder, stem = root / "Training_Corpora" / "SemCor", "semcor"
    elif name in EVALUATION_SETS:
        folder, stem = root / "Evaluation_Datasets" / name, name
    else:
        raise ValueError(f"unknown WSD corpus {name!r}; expected one of {', '.join(EVALUATION_SETS)} or semcor")
    return folder / f"{stem}.data.xml", folder / f"{stem}.gold.key.txt"


def read_keys(path: str | Path, wordnet: WordNetSenses | None = None) -> dict[str, tuple[str, ...]]:
    """Read a key file (gold or system output): ``instance_id key1 [key2 ...]`` per line.

    Blank lines are ignored; a line with an id but no key, a repeated id, or (when ``wordnet`` is given)
    a key WordNet does not know raises :class:`WSDDataError` with the line, as do a missing file and
    bytes that are not UTF-8.
    """
    keys: dict[str, tuple[str, ...]] = {}
    for lineno, line in enumerate(read_lines(Path(path), WSDDataError), 1):
        parts = line.split()
        if not parts:
            continue
        if len(parts) < 2:
            raise WSDDataError(f"{path}:{lineno}: instance {parts[0]!r} has no sense key")
        if parts[0] in keys:
            raise WSDDataError(f"{path}:{lineno}: instance {parts[0]!r} is listed twice")
        if wordnet is not None:
            for key in parts[1:]:
                if key not in wordnet:
                    raise WSDDataError(f"{path}:{lineno}: sense key {key!r} is not in WordNet's index.sense")
        keys[parts[0]] = tuple(parts[1:])
    return keys


def load_corpus(xml_path: str | Path, key_path: str | Path, wordnet: WordNetSenses | None = None,
                name: str | None = None, underscores_as_spaces: bool = False) -> WSDCorpus:
    """Load a Raganato-format corpus and its gold keys, checking that the two agree.

    Every XML instance must have a gold line and every gold line an XML instance; with ``wordnet``
    every gold key must be a WordNet sense key. ``underscores_as_spaces`` writes SemCor's multiword forms
    (``primary_election``) as the evaluation sets do (``primary election``); spans do not change.

    Example:
        >>> corpus = load_corpus("semcor.data.xml", "semcor.gold.key.txt")   # doctest: +SKIP
        >>> len(corpus.sentences), len(corpus)                               # doctest: +SKIP
        (37176, 224716)
    """
    xml_path, key_path = Path(xml_path), Path(key_path)
    sentences, instances = _read_xml(xml_path, underscores_as_spaces)
    gold = read_keys(key_path, wordnet)
    for ordinal, inst in enumerate(instances):
        if inst.id not in gold:
            line = _xml_line(xml_path, "instance", ordinal)
            raise WSDDataError(f"{xml_path}:{line}: instance {inst.id!r} has no line in {key_path}")
    if len(gold) != len(instances):
        known = {inst.id for inst in instances}
        stray = next(iid for iid in gold if iid not in known)
        raise WSDDataError(f"{key_path}:{_key_line(key_path, stray)}: instance {stray!r} is not in {xml_path}")
    return WSDCorpus(name or xml_path.name.removesuffix(".data.xml"), sentences, instances, gold,
                     (str(xml_path), str(key_path)))


def _read_xml(path: Path, underscores_as_spaces: bool) -> tuple[dict[str, str], list[Instance]]:
    """Stream the XML sentence by sentence (``iterparse``, clearing what is done) into texts and spans."""
    sentences: dict[str, str] = {}
    instances: list[Instance] = []
    seen: set[str] = set()
    interned: dict[str, str] = {}  # lemmas and POS tags repeat: keep one string object each
    counts = {"sentence": 0, "wf": 0, "instance": 0}  # ordinals, to find a bad element's line

    def fail(tag: str, message: str) -> NoReturn:
        raise WSDDataError(f"{path}:{_xml_line(path, tag, counts[tag])}: {message}")

    try:
        for _, elem in ET.iterparse(path, events=("end",)):
            if elem.tag == "text":
                elem.clear()
            if elem.tag != "sentence":
                continue
            sid = elem.get("id")
            if not sid:
                fail("sentence", "<sentence> without an id")
            if sid in sentences:
                fail("sentence", f"sentence id {sid!r} is used twice")
            words: list[str] = []
            offset = 0
            for child in elem:
                tag = child.tag
                if tag not in ("wf", "instance"):
                    fail("sentence", f"unexpected <{tag}> in sentence {sid!r}")
                form = child.text
                if not form:
                    fail(tag, f"empty word form in sentence {sid!r}")
                if underscores_as_spaces:
                    form = form.replace("_", " ")
                if words:
                    offset += 1
                start, offset = offset, offset + len(form)
                words.append(form)
                if tag == "instance":
                    iid, lemma, pos = child.get("id"), child.get("lemma"), child.get("pos")
                    if not iid or not lemma or not pos:
                        absent = next(a for a, v in (("id", iid), ("lemma", lemma), ("pos", pos)) if not v)
                        fail(tag, f"<instance> in sentence {sid!r} lacks its {absent} attribute "
                                  "(every instance needs an id, lemma and pos)")
                    if pos not in POS_TAGS:
                        fail(tag, f"instance {iid!r} has pos {pos!r}; expected one of {', '.join(POS_TAGS)}")
                    if iid in seen:
                        fail(tag, f"instance id {iid!r} is used twice")
                    seen.add(iid)
                    instances.append(Instance(iid, sid, interned.setdefault(lemma, lemma),
                                              interned.setdefault(pos, pos), start, offset))
                counts[tag] += 1
            sentences[sid] = " ".join(words)
            counts["sentence"] += 1
            elem.clear()
    except ET.ParseError as exc:
        line, column = exc.position
        raise WSDDataError(f"{path}:{line}:{column}: not well-formed XML ({exc})") from None
    except FileNotFoundError:
        raise WSDDataError(f"{path}: file not found") from None
    return sentences, instances


def _xml_line(path: Path, tag: str, ordinal: int) -> int:
    """The line of the ``ordinal``-th (0-based) ``<tag>`` start tag: a second, slow pass on the error path only."""
    parser = expat.ParserCreate()
    found: list[int] = []
    seen = [0]

    def start(name: str, attrs: dict[str, str]) -> None:
        if name == tag and not found:
            if seen[0] == ordinal:
                found.append(parser.CurrentLineNumber)
            seen[0] += 1

    parser.StartElementHandler = start
    with open(path, "rb") as f:
        try:
            while not found and (chunk := f.read(1 << 16)):
                parser.Parse(chunk, False)
        except expat.ExpatError:
            pass
    return found[0] if found else 0


def _key_line(path: Path, instance_id: str) -> int:
    """The line of ``instance_id`` in a key file (error path only)."""
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.split()[:1] == [instance_id]:
                return lineno
    return 0
