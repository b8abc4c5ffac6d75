"""Bahdanau, Cho & Bengio (2014): how RNNsearch was trained, as fairseq-train options.

Appendix B.2: Adadelta (rho 0.95, epsilon 1e-6) on minibatches of 80 sentences, the
gradient's L2 norm rescaled to at most 1, the cost averaged over sentences. The paper
gives its training time (about 5 days), not epochs: the recipes choose the epochs.
"""
from typing import List

BATCH_SENTENCES = 80


def optimizer(gpus: int = 1) -> List[str]:
    """Appendix B.2's optimiser and batches (split over ``gpus`` processes)."""
    return ["--optimizer", "adadelta", "--adadelta-rho", "0.95", "--adadelta-eps", "1e-6",
            "--lr", "1.0", "--batch-size", str(BATCH_SENTENCES // gpus), "--clip-norm", "1", "--sentence-avg",
            "--criterion", "cross_entropy"]


def train(epochs: int, gpus: int = 1) -> List[str]:
    """Appendix B.2's optimiser and batches, ``epochs`` epochs."""
    return optimizer(gpus) + ["--max-epoch", str(epochs)]


def main(argv=None):
    """python -m fairseq_luong.paper_settings.bahdanau2014 --epochs E [--gpus N]: the options, one a line."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, required=True)
    parser.add_argument("--gpus", type=int, default=1)
    args = parser.parse_args(argv)
    print("\n".join(train(args.epochs, args.gpus)))


if __name__ == "__main__":
    main()
