"""Luong, Pham & Manning (2015): the training protocol of section 4.1 and the rows of
Tables 1, 2, 4 and 6, written once.

The WMT'14 recipe (``examples/wmt14_en_de``), the in-form study
(``examples/luong2015_in_form``) and the paper-size archs (``*_wmt_en_de`` in
``models/luong_lstm.py``) all read this module; a setting of the protocol is changed here
or nowhere. Standard library only.

    python -m fairseq_luong.paper_settings.luong2015 model NAME [--gpus N]   fairseq-train options, one a line
    python -m fairseq_luong.paper_settings.luong2015 rows                    the rows, "|"-separated (run.sh)
    python -m fairseq_luong.paper_settings.luong2015 ensemble                the ensemble's models
"""
import argparse
from typing import List, NamedTuple, Optional, Tuple

# ---------------------------------------------------------------------------------
# Section 4.1
LAYERS = 4           # "stacking LSTM models have 4 layers"
UNITS = 1000         # "each with 1000 cells, and 1000-dimensional embeddings"
INIT_UNIFORM = 0.1   # "parameters are uniformly initialized in [-0.1, 0.1]"
BATCH_SENTENCES = 128  # "mini-batch size is 128"
CLIP_NORM = 5        # "normalized gradient is rescaled whenever its norm exceeds 5"
DROPOUT = 0.2        # "dropout with probability 0.2 for our LSTMs"
EPOCHS, HALVE_AFTER = 10, 5                  # "10 epochs ... after 5 epochs, we begin to halve"
DROPOUT_EPOCHS, DROPOUT_HALVE_AFTER = 12, 8  # "for dropout models, we train for 12 epochs and
#                                              start halving the learning rate after 8 epochs"
MAX_WORDS = 50       # "we filter out sentence pairs whose lengths exceed 50 words"
LOCAL_WINDOW = 10    # "D is empirically selected as 10" (section 3.2)

SIZE = ["--encoder-layers", str(LAYERS), "--decoder-layers", str(LAYERS),
        "--encoder-embed-dim", str(UNITS), "--decoder-embed-dim", str(UNITS),
        "--encoder-hidden-size", str(UNITS), "--decoder-hidden-size", str(UNITS)]
# U[-0.1, 0.1], and softmax(W_s h~_t) without a bias (eq. 6)
INIT = ["--init-uniform", str(INIT_UNIFORM), "--no-output-bias"]
REVERSE = ["--reverse-source"]


def optimizer(gpus: int = 1) -> List[str]:
    """Plain SGD, learning rate 1.0, on the gradient averaged over the batch's sentences;
    batches of 128 (split over ``gpus`` processes); gradient norm rescaled to 5; the
    cross-entropy itself (no label smoothing; the fused criterion computes it in float32)."""
    return ["--optimizer", "sgd", "--lr", "1.0", "--sentence-avg", "--batch-size", str(BATCH_SENTENCES // gpus),
            "--clip-norm", str(CLIP_NORM), "--criterion", "fused_label_smoothed_cross_entropy",
            "--label-smoothing", "0"]


def halving(epochs: int, halve_after: int) -> List[str]:
    """``epochs`` epochs, the rate halved every epoch after the ``halve_after``-th: fairseq's
    fixed schedule with --force-anneal F gives epoch e >= F the rate lr * 0.5^(e + 1 - F)."""
    return ["--lr-scheduler", "fixed", "--lr-shrink", "0.5", "--force-anneal", str(halve_after + 1),
            "--max-epoch", str(epochs)]


def dropout(on: bool) -> List[str]:
    return ["--dropout", str(DROPOUT) if on else "0"]


def schedule(with_dropout: bool) -> List[str]:
    """Dropout and the epochs that go with it (section 4.1)."""
    if with_dropout:
        return dropout(True) + halving(DROPOUT_EPOCHS, DROPOUT_HALVE_AFTER)
    return dropout(False) + halving(EPOCHS, HALVE_AFTER)


# ---------------------------------------------------------------------------------
# The models of Tables 1, 2 and 4
class Model(NamedTuple):
    arch: str
    flags: Tuple[str, ...]  # what sets it apart among models of the same arch
    reverse: bool
    dropout: bool

    def options(self) -> List[str]:
        """--arch and the model's own options, without size, optimiser or schedule."""
        return ["--arch", self.arch, *self.flags] + (REVERSE if self.reverse else [])


MODELS = {
    # Table 1's ladder: each adds one thing to the one above
    "base": Model("luong_base", (), False, False),
    "reverse": Model("luong_base", (), True, False),
    "dropout": Model("luong_base", (), True, True),
    "global_location": Model("luong_global_location", ("--no-input-feed",), True, True),
    "global_location_feed": Model("luong_global_location", (), True, True),
    # Table 4: every attention with input feeding, reversed source and dropout
    "global_dot_feed": Model("luong_global_dot", (), True, True),
    "global_general_feed": Model("luong_global_general", (), True, True),
    "localm_dot_feed": Model("luong_localm", ("--attention-score", "dot"), True, True),
    "localm_general_feed": Model("luong_localm", (), True, True),  # the arch's score: general
    "localp_dot_feed": Model("luong_localp", ("--attention-score", "dot"), True, True),
    "localp_general_feed": Model("luong_localp", (), True, True),
    # the ensemble's models without dropout ("with and without dropout", section 4.2)
    "global_dot_feed_nodrop": Model("luong_global_dot", (), True, False),
    "localp_general_feed_nodrop": Model("luong_localp", (), True, False),
}

# "8 different models of various settings, e.g., using different attention approaches, with
# and without dropout etc." (section 4.2); which eight is not said. Ours: the six Table 4
# models with dropout whose perplexity the paper reports below 7 (local-m (dot), "ppl > 7",
# left out), and two without dropout.
ENSEMBLE = ["global_location_feed", "global_dot_feed", "global_general_feed", "localm_general_feed",
            "localp_dot_feed", "localp_general_feed", "global_dot_feed_nodrop", "localp_general_feed_nodrop"]


def paper_model(name: str, gpus: int = 1) -> List[str]:
    """fairseq-train options of model NAME at the paper's size, with its protocol."""
    m = MODELS[name]
    return SIZE + INIT + optimizer(gpus) + m.options() + schedule(m.dropout)


# ---------------------------------------------------------------------------------
# The rows. The paper's BLEU: tokenised (Tables 1, 4); Table 2's is NIST BLEU (mteval-v13a).
class Row(NamedTuple):
    name: str
    models: Tuple[str, ...]
    unk: str                    # "no", "yes" or "both" (BLEU without and with unk replacement)
    paper_ppl: Optional[str]
    paper_bleu: Optional[str]
    what: str
    paper_aer: Optional[float]  # Table 6 (RWTH En-De gold alignments)
    split: str                  # test (newstest2014) or test1 (newstest2015)


ROWS = [
    Row("t1_base", ("base",), "no", "10.6", "11.3", "Table 1: Base", None, "test"),
    Row("t1_reverse", ("reverse",), "no", "9.9", "12.6", "Table 1: Base + reverse", None, "test"),
    Row("t1_dropout", ("dropout",), "no", "8.1", "14.0", "Table 1: + dropout", None, "test"),
    Row("t1_global_location", ("global_location",), "no", "7.3", "16.8", "Table 1: + global attention (location)",
        None, "test"),
    Row("t1_feed_input", ("global_location_feed",), "no", "6.4", "18.1", "Table 1: + feed input", None, "test"),
    Row("t1_localp_general", ("localp_general_feed",), "no", "5.9", "19.0",
        "Table 1: + local-p attention (general) + feed input", None, "test"),
    Row("t1_unk_replace", ("localp_general_feed",), "yes", None, "20.9", "Table 1: + unk replace", None, "test"),
    Row("t1_ensemble", tuple(ENSEMBLE), "yes", None, "23.0", "Table 1: ensemble of 8 models + unk replace", 0.34,
        "test"),
    Row("t2_ensemble", tuple(ENSEMBLE), "yes", None, "25.9 (NIST)", "Table 2: the ensemble on newstest2015 (WMT'15)",
        None, "test1"),
    Row("t4_global_location", ("global_location_feed",), "both", "6.4", "18.1 / 19.3", "Table 4: global (location)",
        0.39, "test"),
    Row("t4_global_dot", ("global_dot_feed",), "both", "6.1", "18.6 / 20.5", "Table 4: global (dot)", None, "test"),
    Row("t4_global_general", ("global_general_feed",), "both", "6.1", "17.3 / 19.1", "Table 4: global (general)",
        None, "test"),
    Row("t4_localm_dot", ("localm_dot_feed",), "both", ">7.0", "x", "Table 4: local-m (dot)", None, "test"),
    Row("t4_localm_general", ("localm_general_feed",), "both", "6.2", "18.6 / 20.4", "Table 4: local-m (general)",
        0.34, "test"),
    Row("t4_localp_dot", ("localp_dot_feed",), "both", "6.6", "18.0 / 19.6", "Table 4: local-p (dot)", None, "test"),
    Row("t4_localp_general", ("localp_general_feed",), "both", "5.9", "19.0 / 20.9", "Table 4: local-p (general)",
        0.36, "test"),
]
BY_ROW = {r.name: r for r in ROWS}
BERKELEY_AER = 0.32  # Table 6's Berkeley aligner


def paper_bleu(row: str, unk: bool = False) -> Optional[float]:
    """The paper's BLEU of ROW as a number (Table 4's "without / with unk replacement")."""
    cell = BY_ROW[row].paper_bleu
    if cell is None or cell == "x":
        return None
    parts = cell.split(" / ")
    return float((parts[1] if unk and len(parts) > 1 else parts[0]).split()[0])


def paper_ppl(row: str):
    """The paper's test perplexity of ROW: a number, the paper's text (">7.0") or None."""
    cell = BY_ROW[row].paper_ppl
    if cell is None:
        return None
    try:
        return float(cell)
    except ValueError:
        return cell


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("model")
    p.add_argument("name", choices=sorted(MODELS))
    p.add_argument("--gpus", type=int, default=1)
    sub.add_parser("rows")
    sub.add_parser("ensemble")
    args = parser.parse_args(argv)
    if args.command == "model":
        if BATCH_SENTENCES % args.gpus:
            parser.error(f"--gpus {args.gpus}: the batch of {BATCH_SENTENCES} sentences must split evenly")
        print("\n".join(paper_model(args.name, args.gpus)))
    elif args.command == "rows":
        for r in ROWS:
            print("|".join([r.name, ",".join(r.models), r.unk, r.paper_ppl or "", r.paper_bleu or "", r.what,
                            "-" if r.paper_aer is None else f"{r.paper_aer:.2f}", r.split]))
    else:
        print(" ".join(ENSEMBLE))


if __name__ == "__main__":
    main()
