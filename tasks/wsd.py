"""WSD on the Raganato et al. (2017) unified evaluation framework: ALL, with SemCor sense centroids."""

from iso_bench.tasks._groups import WORD

from iso_bench.data import RawSource
from iso_bench.kinds.cards import TaskCard

CARD = TaskCard(
    held_out="train",  # the held-out setting fits on its training split (SemCor)
    name="WSD-ALL",
    kind="wsd",
    suite="word",
    group=WORD,
    size="7,253 test instances (SE2 2,282, SE3 1,850, SE07 455, SE13 1,644, SE15 1,022); SemCor 224,716",
    source=RawSource(path="wsd/WSD_Evaluation_Framework", archive_dir="wsd", version="2017",
                     url="http://lcl.uniroma1.it/wsdeval/data/WSD_Evaluation_Framework.zip"),
    params={
        "test_set": "ALL",
        "wordnet": RawSource(path="nltk_data/corpora/wordnet", archive_dir="nltk_data/corpora", version="3.0",
                             url="https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/packages/corpora/wordnet.zip"),
    },
    metadata=dict(
        description=(
            "All-words word sense disambiguation on the concatenation of Senseval-2, Senseval-3, SemEval-2007, "
            "SemEval-2013 and SemEval-2015 (Raganato et al. 2017). Without training: each WordNet 3.0 sense's "
            "centroid is the mean vector of its SemCor instances; an instance takes the most cosine-similar "
            "candidate sense of its lemma and POS, else WordNet's first sense. F1 as the framework's scorer; "
            "per-dataset F1 in f1_<dataset>."
        ),
        reference="https://aclanthology.org/E17-1010/",
        type="Classification",
        main_score="f1",
        domains=("News", "Non-fiction", "Written"),
        license="cc-by-nc-sa-4.0",
        citation="""@inproceedings{raganato-etal-2017-word,
  title = {Word Sense Disambiguation: A Unified Evaluation Framework and Empirical Comparison},
  author = {Raganato, Alessandro and Camacho-Collados, Jose and Navigli, Roberto},
  booktitle = {Proceedings of EACL 2017},
  year = {2017},
  pages = {99--110},
}""",
    ),
)
