"""WiC: loading (character spans, strict format checks) and the training-free threshold protocol."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from iso_bench.kinds.wic import (
    WiCFormatError,
    accuracy,
    choose_threshold,
    evaluate_wic,
    labels_of,
    load_wic,
    load_wic_split,
    unrelated_targets,
)
from iso_bench.numerics.linalg import paired_cosine as cosine_pairs
from tests.conftest import SHARED_DATA, _missing

# ------------------------------------------------------------------------------------- threshold protocol

# Six pairs; sorted distinct scores 0, .25, .5, .75, 1 (0.5 twice: one T, one F).
SCORES = [1.0, 0.0, 0.5, 0.5, 0.75, 0.25]
LABELS = [True, False, True, False, True, False]
# Candidates and train accuracy, by hand (predict T when score >= t):
#   t=0     all T                           3/6
#   t=.125  T for .25..1: wrong .25,.5F      4/6
#   t=.375  T for .5..1:  wrong .5F          5/6
#   t=.625  T for .75, 1: wrong .5T          5/6
#   t=.875  T for 1:      wrong .5T, .75     4/6
#   t>1     all F                           3/6
# .375 and .625 tie at 5/6; the smallest wins.


def test_threshold_by_hand_with_a_tie() -> None:
    assert choose_threshold(SCORES, LABELS) == 0.375
    assert accuracy(SCORES, LABELS, 0.375) == pytest.approx(5 / 6)
    assert accuracy(SCORES, LABELS, 0.625) == pytest.approx(5 / 6)
    assert accuracy(SCORES, LABELS, 0.125) == pytest.approx(4 / 6)
    assert accuracy(SCORES, LABELS, 0.0) == 0.5


def test_threshold_does_not_depend_on_input_order() -> None:
    rng = np.random.default_rng(0)
    for _ in range(5):
        order = rng.permutation(len(SCORES))
        assert choose_threshold(np.array(SCORES)[order], np.array(LABELS)[order]) == 0.375


def test_threshold_extremes() -> None:
    # all True: the smallest score predicts everything True
    assert choose_threshold([0.2, 0.7, 0.4], [True, True, True]) == 0.2
    # all False: just above the largest score, a finite float
    t = choose_threshold([0.2, 0.7, 0.4], [False, False, False])
    assert t == np.nextafter(0.7, np.inf) and np.isfinite(t)
    assert accuracy([0.2, 0.7, 0.4], [False, False, False], t) == 1.0
    # one distinct score and mixed labels: both extremes tie at 1/2, the smaller (all True) wins
    assert choose_threshold([0.3, 0.3], [True, False]) == 0.3


def test_threshold_between_adjacent_floats_still_separates() -> None:
    lo = 1.0
    hi = float(np.nextafter(lo, 2.0))  # no float strictly between: the midpoint rounds onto an end
    t = choose_threshold([lo, hi], [False, True])
    assert accuracy([lo, hi], [False, True], t) == 1.0


def test_labels_as_0_1_and_bad_input() -> None:
    assert choose_threshold(SCORES, [1, 0, 1, 0, 1, 0]) == 0.375
    with pytest.raises(ValueError, match="same length"):
        choose_threshold([0.1, 0.2], [True])
    with pytest.raises(ValueError, match="non-finite"):
        choose_threshold([0.1, float("nan")], [True, False])
    with pytest.raises(ValueError, match="no scores"):
        accuracy([], [], 0.0)
    with pytest.raises(ValueError, match="booleans"):
        accuracy([0.1, 0.2], [2, 0], 0.0)


def test_cosine_pairs_by_hand() -> None:
    A = np.array([[1.0, 0.0], [1.0, 1.0], [1.0, 0.0], [3.0, 4.0]])
    B = np.array([[0.0, 2.0], [2.0, 2.0], [-3.0, 0.0], [4.0, 3.0]])
    np.testing.assert_allclose(cosine_pairs(A, B), [0.0, 1.0, -1.0, 24 / 25])
    with pytest.raises(ValueError, match="row 1 of B"):
        cosine_pairs(A[:2], np.array([[1.0, 0.0], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="same shape"):
        cosine_pairs(A, B[:3])


def test_evaluate_fits_on_train_and_applies_to_the_rest() -> None:
    result = evaluate_wic(
        {"train": SCORES, "dev": [0.4, 0.3], "test": [0.9, 0.1, 0.38, 0.37]},
        {"train": LABELS, "dev": [True, True], "test": [True, False, False, False]},
    )
    assert result.threshold == 0.375 and result.fit_split == "train"
    assert result.accuracy == pytest.approx({"train": 5 / 6, "dev": 0.5, "test": 0.75})
    assert result.sizes == {"train": 6, "dev": 2, "test": 4}
    with pytest.raises(ValueError, match="fit split"):
        evaluate_wic({"dev": [0.1, 0.2]}, {"dev": [True, False]})


# ------------------------------------------------------------------------------------- loading


def _write(tmp_path: Path, data: str, gold: str) -> tuple[Path, Path]:
    d, g = tmp_path / "x.data.txt", tmp_path / "x.gold.txt"
    d.write_text(data, encoding="utf-8")
    g.write_text(gold, encoding="utf-8")
    return d, g


GOOD = "bank\tN\t1-4\tThe bank of the river .\tI went to the bank .\ngo\tV\t1-0\tI went home .\tGo away .\n"


def test_char_spans_on_a_handmade_pair(tmp_path: Path) -> None:
    pairs = load_wic_split(*_write(tmp_path, GOOD, "T\nF\n"))
    p = pairs[0]
    # "The " is 4 characters: bank = [4, 8); "I went to the " is 2+5+3+4 = 14: bank = [14, 18)
    assert (p.span1, p.span2) == ((4, 8), (14, 18))
    assert (p.target1, p.target2, p.lemma, p.pos, p.label, p.indices, p.line) == (
        "bank",
        "bank",
        "bank",
        "N",
        True,
        (1, 4),
        1,
    )
    assert (pairs[1].span1, pairs[1].span2, pairs[1].target1, pairs[1].label) == ((2, 6), (0, 2), "went", False)
    assert labels_of(pairs).tolist() == [True, False]


def test_tokens_are_split_on_plain_spaces_only(tmp_path: Path) -> None:
    # the release has sentences with no-break spaces (train line 5111: ". \xa0\xa0 He"); a NBSP run between
    # two spaces is a token of its own, so str.split() (which drops it) would shift every later index
    data = "run\tV\t3-0\tx . \xa0 He ran .\tRun !\n"
    p = load_wic_split(*_write(tmp_path, data, "T\n"))[0]
    assert p.target1 == "He" and p.span1 == (6, 8)


def test_no_trailing_newline_and_crlf(tmp_path: Path) -> None:
    pairs = load_wic_split(*_write(tmp_path, GOOD.replace("\n", "\r\n").rstrip("\r\n"), "T\r\nF"))
    assert len(pairs) == 2 and pairs[1].sentence2 == "Go away ."


@pytest.mark.parametrize(
    ("data", "gold", "where", "message"),
    [
        ("bank\tN\t1-4\tThe bank .\n", "T\n", "data:1", "expected 5 tab-separated fields"),
        (GOOD + "bank\tN\t1-x\ta bank\ta bank\n", "T\nF\nT\n", "data:3", "not of the form i-j"),
        (GOOD + "bank\tN\t-1-1\ta bank\ta bank\n", "T\nF\nT\n", "data:3", "not of the form i-j"),
        (GOOD + "bank\tN\t1-2\ta bank\ta bank\n", "T\nF\nT\n", "data:3", "token index 2 is outside sentence 2"),
        (GOOD + "bank\tN\t1-1\ta  bank\ta bank\n", "T\nF\nT\n", "data:3", "token 1 of sentence 1 is empty"),
        (GOOD + "bank\tA\t1-1\ta bank\ta bank\n", "T\nF\nT\n", "data:3", "part of speech 'A'"),
        (GOOD, "T\nX\n", "gold:2", "label 'X' is not T or F"),
        (GOOD, "T\n", "gold:2", "missing label"),
        (GOOD, "T\nF\nT\n", "gold:3", "label with no data line"),
        (GOOD, "T\n\nF\n", "gold:2", "label '' is not T or F"),
        (GOOD + "\n", "T\nF\nT\n", "data:3", "expected 5 tab-separated fields"),
    ],
)
def test_malformed_files_name_file_and_line(tmp_path: Path, data: str, gold: str, where: str, message: str) -> None:
    d, g = _write(tmp_path, data, gold)
    expected = f"{d if where.startswith('data') else g}:{where.split(':')[1]}: "
    with pytest.raises(WiCFormatError, match=message) as info:
        load_wic_split(d, g)
    assert str(info.value).startswith(expected)


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    d, g = _write(tmp_path, GOOD, "T\nF\n")
    d.write_bytes(GOOD.encode() + b"bank\tN\t0-0\tb\xffank\tbank\n")
    with pytest.raises(WiCFormatError, match=f"{d}:3: not valid UTF-8"):
        load_wic_split(d, g)


def test_unrelated_targets_flags_a_misplaced_index(tmp_path: Path) -> None:
    data = (
        "go\tV\t1-1\tI went home .\tThey go .\n"  # suppletive form: fine
        "call\tV\t2-0\tHe called round .\tCall him .\n"  # index 2 is 'round', not 'called'
        "be\tV\t1-1\tIt is .\tThey were .\n"
    )
    pairs = load_wic_split(*_write(tmp_path, data, "T\nF\nT\n"))
    assert unrelated_targets(pairs) == [(2, 1, "round")]


def test_unknown_split() -> None:
    with pytest.raises(ValueError, match="unknown WiC split"):
        load_wic("/nonexistent", "validation")


# ------------------------------------------------------------------------------------- the real release


@pytest.fixture(scope="module")
def wic_root() -> Path:
    root = SHARED_DATA / "wic" / "WiC_dataset"
    if not (root / "train" / "train.data.txt").is_file():
        _missing(f"the WiC release in {root}")
    return root


@pytest.mark.parametrize(("split", "size"), [("train", 5428), ("dev", 638), ("test", 1400)])
def test_real_sizes_balance_and_spans(wic_root: Path, split: str, size: int) -> None:
    pairs = load_wic(wic_root, split)
    assert len(pairs) == size
    assert int(labels_of(pairs).sum()) == size // 2  # every split of the release is balanced T/F
    for p in pairs:
        sides = ((p.sentence1, p.span1, p.indices[0]), (p.sentence2, p.span2, p.indices[1]))
        for sentence, (start, end), index in sides:
            assert 0 <= start < end <= len(sentence)
            assert sentence[start:end] == sentence.split(" ")[index]


def test_real_targets_relate_to_their_lemma(wic_root: Path) -> None:
    # one misplaced index in the whole release: train line 1557, "The engineer called round whilst you were
    # away ." has index 3 ("round"); the same sentence elsewhere in train (lines 5055, 5315) has index 2
    train = load_wic(wic_root, "train")
    assert unrelated_targets(train) == [(1557, 1, "round")]
    assert [p.indices for p in train if p.line in (5055, 5315)] == [(4, 2), (3, 2)]
    assert unrelated_targets(load_wic(wic_root, "dev")) == []
    assert unrelated_targets(load_wic(wic_root, "test")) == []
