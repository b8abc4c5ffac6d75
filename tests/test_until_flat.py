"""--lr-scheduler reduce_lr_on_plateau_until_flat (fairseq_luong/optim): fairseq's plateau
schedule that stops once the last --flat-epochs epochs trained after --min-shrinks reductions
of the rate and the validation metric fell by less than --flat-below over them; through fairseq-train
in this process, on the number corpus. --lr-threshold 0.5: every epoch after the first is a
bad one, so the rate is halved after epochs 2, 3, 4, ..."""
import math
import re

import pytest

from fairseq_luong.errors import UserError
from fairseq_luong.optim.reduce_lr_on_plateau_until_flat import fall
from tests.helpers import USER_DIR, fairseq_cli

TRAIN = ["--user-dir", USER_DIR, "--arch", "luong_tiny", "--optimizer", "adam", "--lr", "0.005",
         "--max-tokens", "1000", "--no-progress-bar", "--log-format", "simple", "--log-interval", "1",
         "--num-workers", "0", "--no-epoch-checkpoints", "--seed", "1",
         "--lr-scheduler", "reduce_lr_on_plateau_until_flat", "--lr-shrink", "0.5", "--lr-threshold", "0.5",
         "--stop-min-lr", "0"]


def train(data_bin, save_dir, *extra):
    return fairseq_cli("train", [str(data_bin / "bin"), *TRAIN, "--save-dir", str(save_dir), *extra])[1]


def trained_epochs(log):
    """(epoch, rate) of each epoch trained, from fairseq's end-of-epoch lines."""
    return [(int(e), float(r)) for e, r in re.findall(r"\| train \| epoch (\d+) \|.*? \| lr ([\d.e-]+) \|", log)]


def test_the_fall_over_the_last_epochs():
    assert fall([3.0, 2.5], 2) is None
    assert fall([3.0, 2.5, 2.49, 2.48], 2) == pytest.approx(0.02)
    assert fall([2.5, 2.4, 2.8], 2) == pytest.approx(-0.3)  # it rose
    assert fall([20.0, 25.0, 26.0], 2, maximize=True) == pytest.approx(6.0)  # a metric to maximise (BLEU) rose


@pytest.mark.parametrize("min_shrinks,flat_epochs,stops_after", [(2, 2, 5), (3, 2, 6), (2, 1, 4)])
def test_it_stops_once_the_flat_epochs_trained_after_enough_reductions(data_bin, tmp_path, one_thread, min_shrinks,
                                                                       flat_epochs, stops_after):
    """--flat-below 100 bits: every two epochs are flat. The rate is halved --min-shrinks times
    by the step after epoch 1 + min_shrinks; the training then trains --flat-epochs epochs at
    the rates after it, and stops (rate 0) after epoch 1 + min_shrinks + flat_epochs: never at
    the step of the last halving, before the halved rate has trained an epoch."""
    log = train(data_bin, tmp_path, "--min-shrinks", str(min_shrinks), "--flat-below", "100", "--max-epoch", "8",
                "--flat-epochs", str(flat_epochs))
    epochs = trained_epochs(log)
    assert [e for e, _ in epochs] == list(range(1, stops_after + 1))
    halved = [e for (e, r), (_, before) in zip(epochs[1:], epochs) if r < before]  # epochs at a newly halved rate
    assert halved[min_shrinks - 1] == stops_after - flat_epochs + 1  # the last flat_epochs after min_shrinks halvings
    assert f"converged after epoch {stops_after}: the rate was reduced {stops_after - 1} times" in log
    assert "current learning rate (0.0) is smaller than or equal to minimum learning rate" in log


def test_a_curve_that_is_not_flat_trains_on_past_the_reductions(data_bin, tmp_path, one_thread):
    """--flat-below -100: never flat; only --max-epoch stops it."""
    log = train(data_bin, tmp_path, "--min-shrinks", "1", "--flat-below", "-100", "--max-epoch", "5")
    assert [e for e, _ in trained_epochs(log)] == [1, 2, 3, 4, 5] and "converged" not in log


def test_stopped_and_resumed_it_stops_where_the_uninterrupted_training_stops(data_bin, tmp_path, one_thread):
    """Stopped after epoch 2 (its checkpoint written before epoch 2's step) and resumed, it
    halves and converges at the epochs of the uninterrupted run (the history, the count of
    reductions and the plateau's counters are saved with the scheduler); resumed again after it
    converged, it trains nothing more."""
    flags = ["--min-shrinks", "3", "--flat-below", "100"]
    whole = trained_epochs(train(data_bin, tmp_path / "whole", *flags, "--max-epoch", "8"))
    first = trained_epochs(train(data_bin, tmp_path / "stopped", *flags, "--max-epoch", "2"))
    rest = train(data_bin, tmp_path / "stopped", *flags, "--max-epoch", "8")
    assert first + trained_epochs(rest) == whole and len(whole) == 6
    assert "converged after epoch 6" in rest
    again = train(data_bin, tmp_path / "stopped", *flags, "--max-epoch", "8")
    assert trained_epochs(again) == []


def test_without_stop_min_lr_it_is_refused_in_one_line(data_bin, tmp_path):
    with pytest.raises(UserError, match="add --stop-min-lr 0"):
        assert TRAIN[-2:] == ["--stop-min-lr", "0"]
        fairseq_cli("train", [str(data_bin / "bin"), *TRAIN[:-2],
                              "--save-dir", str(tmp_path), "--max-epoch", "1"])


def test_the_default_flat_threshold_is_one_percent_of_perplexity_in_bits():
    from fairseq_luong.optim.reduce_lr_on_plateau_until_flat import UntilFlatConfig

    assert UntilFlatConfig().flat_below == pytest.approx(math.log2(100 / 99), abs=1e-4)
