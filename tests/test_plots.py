"""Each figure script writes a non-empty PNG: plot_curves.py (Fig. 5), bleu_by_length.py
(Fig. 6), plot_attention.py (Fig. 7); their tables and the local-p windows by hand."""
import runpy

import pytest
import sacrebleu
import torch

from tests.helpers import REPO

# real fairseq-train log lines, simple and json formats (two validations each)
SIMPLE_LOG = """\
2026-11-25 02:29:57 | INFO | train_inner | epoch 001:      2 / 5 loss=6.45, nll_loss=6.44, ppl=86.8, wps=8000, ups=12, wpb=672, bsz=76, num_updates=2, lr=0.005, gnorm=0.25, train_wall=0, wall=1
2026-11-25 02:29:57 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 6.38 | nll_loss 6.371 | ppl 82.75 | wps 8032.9 | wpb 168.5 | bsz 15 | num_updates 5
2026-11-25 02:29:57 | INFO | train | epoch 001 | loss 6.4 | nll_loss 6.39 | ppl 83.9 | wps 9884.9 | ups 13.33 | wpb 741.6 | bsz 60 | num_updates 5 | lr 0.005 | gnorm 0.271 | train_wall 0 | wall 3
2026-11-25 02:29:58 | INFO | train_inner | epoch 002:      2 / 5 loss=6.23, nll_loss=6.2, ppl=73.6, wps=8000, ups=12, wpb=672, bsz=76, num_updates=7, lr=0.005, gnorm=0.25, train_wall=0, wall=2
2026-11-25 02:29:58 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 6.113 | nll_loss 6.071 | ppl 67.22 | wps 7863.3 | wpb 168.5 | bsz 15 | num_updates 10 | best_loss 6.113
"""
JSON_LOG = """\
2026-11-25 02:29:05 | INFO | fairseq_cli.train | {'_name': None, 'common': {'log_format': 'json'}}
2026-11-25 02:29:05 | INFO | train_inner | {"epoch": 1, "update": 0.4, "loss": "6.447", "ppl": "87.2", "num_updates": "2", "lr": "0.005"}
2026-11-25 02:29:05 | INFO | valid | {"epoch": 1, "valid_loss": "6.371", "valid_ppl": "82.74", "valid_num_updates": "5"}
2026-11-25 02:29:05 | INFO | valid | {"epoch": 2, "valid_loss": "6.07", "valid_ppl": "60.5", "valid_num_updates": "10", "valid_best_loss": "6.07"}
"""


def script(name):
    return runpy.run_path(str(REPO / "scripts" / "eval" / f"{name}.py"), run_name=f"script_{name}")


def assert_png(path):
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 2000


def test_plot_curves_reads_both_log_formats(tmp_path, capsys):
    (tmp_path / "simple.log").write_text(SIMPLE_LOG, encoding="utf-8")
    (tmp_path / "json.log").write_text(JSON_LOG, encoding="utf-8")
    png = tmp_path / "curves.png"
    script("plot_curves")["main"]([f"a={tmp_path / 'simple.log'}", str(tmp_path / "json.log"),
                                   "--train-loss", "--png", str(png)])
    out = capsys.readouterr().out
    assert "| a | 2 | 67.22 | 10 | 67.22 |" in out and "| json | 2 | 60.50 | 10 | 60.50 |" in out
    assert_png(png)
    with pytest.raises(SystemExit, match="no validation on subset 'test'"):
        script("plot_curves")["main"]([str(tmp_path / "json.log"), "--subset", "test", "--png", str(png)])
    (tmp_path / "other.log").write_text("hello\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="other.log: no fairseq-train statistics"):
        script("plot_curves")["main"]([str(tmp_path / "other.log"), "--png", str(png)])


def test_epochs_are_ticked_as_whole_numbers(tmp_path, monkeypatch):
    """A curve over epochs (or updates) has whole-number ticks only; fractional x keeps matplotlib's."""
    from fairseq_luong.analysis import plots

    ticks = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: ticks.append([t for ax in fig.axes for t in ax.get_xticks()]))
    plots.plot_panels([("epoch", "ppl", [("a", list(range(1, 20)), [1.0] * 19)], False)], str(tmp_path / "a.png"))
    plots.plot_panels([("hours", "ppl", [("a", [0.5, 1.25, 2.0], [1.0] * 3)], False)], str(tmp_path / "b.png"))
    assert all(float(t).is_integer() for t in ticks[0])
    assert not all(float(t).is_integer() for t in ticks[1])


def test_a_series_may_carry_its_own_line_style(tmp_path, monkeypatch):
    """(name, xs, ys, keywords): the keywords reach matplotlib (one colour per size, training
    dashed, in the in-form report's KFTT sizes figure); a plain series keeps the defaults."""
    from fairseq_luong.analysis import plots

    lines = []
    monkeypatch.setattr(plots, "_save", lambda fig, path: lines.extend(fig.axes[0].get_lines()))
    plots.plot_panels([("epoch", "ppl", [("valid", [1, 2], [3.0, 2.0], {"color": "C3"}),
                                         ("training", [1, 2], [2.0, 1.0], {"color": "C3", "linestyle": "--"}),
                                         ("plain", [1, 2], [1.0, 0.5])], True)], str(tmp_path / "a.png"))
    assert [(x.get_label(), x.get_color(), x.get_linestyle()) for x in lines[:2]] == [
        ("valid", "C3", "-"), ("training", "C3", "--")]
    assert (lines[2].get_label(), lines[2].get_linestyle(), lines[2].get_marker()) == ("plain", "-", "o")


def test_wall_clock_of_validations(tmp_path, capsys):
    """Validation lines carry no wall clock: interpolated in updates between the train lines
    around them (from 0 s at update 0), extrapolated past the last at the last two's rate."""
    from fairseq_luong.analysis.training_log import read_training_log, wall_seconds

    log = tmp_path / "train.log"
    log.write_text("""\
2026-11-25 02:29:57 | INFO | train_inner | epoch 001:      2 / 5 loss=6.4, ppl=86.8, num_updates=2, wall=3
2026-11-25 02:29:57 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 6.3 | ppl 80 | num_updates 5
2026-11-25 02:29:57 | INFO | train | epoch 001 | loss 6.4 | ppl 83.9 | num_updates 5 | wall 9
2026-11-25 02:29:58 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 6.1 | ppl 70 | num_updates 7
""", encoding="utf-8")
    parsed = read_training_log(str(log))
    assert [wall_seconds(parsed, u) for u in (0, 1, 2, 4, 5, 7)] == [0.0, 1.5, 3.0, 7.0, 9.0, 13.0]
    png = tmp_path / "curves.png"
    script("plot_curves")["main"]([str(log), "--x", "minutes", "updates", "--png", str(png)])
    assert "| train | 2 | 70.00 | 0.2 | 70.00 |" in capsys.readouterr().out  # 13 s = 0.2 min
    assert_png(png)


def test_a_resumed_training_reads_as_one(tmp_path):
    """fairseq-train run again into the same --save-dir, its output appended: the records after
    the checkpoint it resumes from go (lost with the stopped run, done again), and the wall
    clock, which fairseq restarts at 0, goes on from its value at that checkpoint."""
    from fairseq_luong.analysis.training_log import read_training_log, wall_seconds

    log = tmp_path / "train.log"
    log.write_text("""\
2026-11-27 07:00:10 | INFO | train_inner | epoch 001:      2 / 4 loss=6.4, ppl=86.8, num_updates=2, wall=10
2026-11-27 07:00:20 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 6.3 | ppl 80 | num_updates 4
2026-11-27 07:00:20 | INFO | train | epoch 001 | loss 6.4 | ppl 83.9 | num_updates 4 | wall 21
2026-11-27 07:00:30 | INFO | train_inner | epoch 002:      2 / 4 loss=6.2, ppl=73.5, num_updates=6, wall=31
2026-11-27 08:00:00 | INFO | fairseq.trainer | Loaded checkpoint s/checkpoint_last.pt (epoch 1 @ 4 updates)
2026-11-27 08:00:07 | INFO | train_inner | epoch 002:      2 / 4 loss=6.1, ppl=68.6, num_updates=6, wall=7
2026-11-27 08:00:12 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 6.0 | ppl 64 | num_updates 8
2026-11-27 08:00:12 | INFO | train | epoch 002 | loss 6.1 | ppl 68.6 | num_updates 8 | wall 12
""", encoding="utf-8")
    parsed = read_training_log(str(log))
    assert [(r.num_updates, r.stats["wall"], r.stats["loss"]) for r in parsed.train_inner] == [(2, 10, 6.4),
                                                                                                (6, 28, 6.1)]
    assert [(r.num_updates, r.stats["wall"]) for r in parsed.train] == [(4, 21), (8, 33)]
    assert [r.num_updates for r in parsed.valid["valid"]] == [4, 8] and wall_seconds(parsed, 8) == 33


def test_bleu_by_length_table_and_plot(tmp_path, capsys):
    lengths = [3, 12, 20, 75, 10]  # bucket edges are inclusive: 10 and 20 close their buckets
    sources = [" ".join(["w"] * n) for n in lengths]
    refs = ["the cat sat on the mat", "a dog ran in the park today", "it is a fine day for it",
            "one two three four five six", "we go home now"]
    for name, lines in (("src", sources), ("ref", refs)):
        (tmp_path / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "copy").write_text("\n".join(refs) + "\n", encoding="utf-8")
    # fairseq-generate output, out of order, --nbest 2: D- lines of the best are used
    gen = []
    for i in (4, 0, 3, 1, 2):
        wrong = "completely unrelated words here" if i in (1, 2) else refs[i]
        gen += [f"S-{i}\t{sources[i]}", f"H-{i}\t-0.5\tx", f"D-{i}\t-0.5\t{wrong}", f"D-{i}\t-0.9\tworse"]
    (tmp_path / "gen.out").write_text("\n".join(gen) + "\n", encoding="utf-8")
    png = tmp_path / "bleu.png"
    script("bleu_by_length")["main"](["--source", str(tmp_path / "src"), "--reference", str(tmp_path / "ref"),
                                      f"copy={tmp_path / 'copy'}", f"gen={tmp_path / 'gen.out'}",
                                      "--png", str(png)])
    out = capsys.readouterr().out
    signature = f"nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:{sacrebleu.__version__}"
    assert out.splitlines()[0] == (  # the result line names what decides the numbers
        f"sacreBLEU ({signature}) by source length: the 5 sentences of {tmp_path / 'src'} grouped by their number of "
        f"whitespace-separated tokens (<=10, ..., >70), against {tmp_path / 'ref'} as it is; copy: "
        f"{tmp_path / 'copy'}, plain text, one translation a line; gen: {tmp_path / 'gen.out'}, D- lines "
        "(fairseq-generate's detokenised hypotheses)")
    assert "| <=10 | 2 | 100.00 | 100.00 |" in out
    assert "| 11-20 | 2 | 100.00 | 0.00 |" in out
    assert "| 21-30 | 0 | - | - |" in out and "| >70 | 1 | 100.00 | 100.00 |" in out
    assert_png(png)
    (tmp_path / "upper").write_text("\n".join(r.upper() for r in refs) + "\n", encoding="utf-8")
    args = ["--source", str(tmp_path / "src"), "--reference", str(tmp_path / "ref"), str(tmp_path / "upper"),
            "--png", str(png)]
    script("bleu_by_length")["main"](args)
    assert "| all | 5 | 0.00 |" in capsys.readouterr().out
    script("bleu_by_length")["main"](args + ["--lowercase"])
    out = capsys.readouterr().out
    assert "| all | 5 | 100.00 |" in out and "|case:lc|" in out.splitlines()[0]
    # fairseq-generate output without D- lines: its H- lines, said so
    (tmp_path / "h_only.out").write_text("".join(f"H-{i}\t-0.5\t{r}\n" for i, r in enumerate(refs)), encoding="utf-8")
    script("bleu_by_length")["main"](args[:4] + [str(tmp_path / "h_only.out"), "--png", str(png)])
    out = capsys.readouterr().out
    assert "| all | 5 | 100.00 |" in out
    assert out.splitlines()[0].endswith(f"h_only: {tmp_path / 'h_only.out'}, H- lines (fairseq-generate's "
                                        "hypotheses; no D- lines in it)")
    # a source in SentencePiece pieces: the buckets would count pieces, and a warning says so
    (tmp_path / "pieces").write_text("\n".join("\u2581" + s.replace(" ", " \u2581") for s in sources) + "\n",
                                     encoding="utf-8")
    script("bleu_by_length")["main"](["--source", str(tmp_path / "pieces")] + args[2:])
    assert (f"warning: {tmp_path / 'pieces'} looks split into SentencePiece pieces: the buckets count its pieces, "
            "not its words; give the source text in words") in capsys.readouterr().err
    (tmp_path / "short").write_text("one line\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="short: 1 lines, but the source has 5"):
        script("bleu_by_length")["main"](["--source", str(tmp_path / "src"), "--reference",
                                          str(tmp_path / "ref"), str(tmp_path / "short"), "--png", str(png)])


def test_local_p_windows_by_hand():
    windows_of = script("plot_attention")["windows_of"]
    # p_t of 4 steps (3 target words + EOS), 4 source words (EOS at position 4), D = 1
    p_values = [torch.tensor([[0.2]]), torch.tensor([[2.7]]), torch.tensor([[4.9]]), torch.tensor([[3.5]])]
    spans, centres = windows_of(p_values, 3, input_word=False, window=1, n_src=4)
    assert spans == [(0, 1), (1, 3), (3, 3)] and centres == pytest.approx([0.2, 2.7, 3.5])
    spans, _ = windows_of(p_values, 3, input_word=True, window=1, n_src=4)
    assert spans == [(1, 3), (3, 3), (2, 3)]
    spans, _ = windows_of([torch.tensor([[6.0, 7.0]])], 1, input_word=False, window=1, n_src=4)
    assert spans == [(3, 3)]  # centred on EOS (p_t clipped to S - 1): the last word is in the window
    spans, _ = windows_of([torch.tensor([[6.0, 7.0]])], 1, input_word=False, window=0, n_src=4)
    assert spans == [None]  # D = 0 on EOS: no word in the window, nothing to draw


def test_plot_attention_writes_a_png_per_line(diagonal_model, tmp_path, capsys):
    (tmp_path / "src").write_text("twenty zebra one\nseven cats\n", encoding="utf-8")
    (tmp_path / "tgt").write_text("Zwanzig Zebra Eins\nSieben Katzen\n", encoding="utf-8")
    main = script("plot_attention")["main"]
    common = [str(diagonal_model / "bin"), "--path", str(diagonal_model / "crafted.pt"), "--source",
              str(tmp_path / "src"), "--out-dir", str(tmp_path / "maps")]
    main(common + ["--target", str(tmp_path / "tgt"), "--lines", "1", "2"])
    main(common + ["--lines", "2", "--out-dir", str(tmp_path / "translated"), "--beam", "2"])  # translate first
    printed = capsys.readouterr().out.split()
    assert printed == [str(tmp_path / "maps" / "attention_1.png"), str(tmp_path / "maps" / "attention_2.png"),
                       str(tmp_path / "translated" / "attention_2.png")]
    for path in printed:
        assert_png(tmp_path / path)
    with pytest.raises(SystemExit, match="--lines 3: .* has 2 lines"):
        main(common + ["--lines", "3"])


def test_japanese_words_without_a_font_for_them_warn_once_not_per_character(tmp_path, monkeypatch, caplog):
    import warnings

    import numpy as np

    from fairseq_luong.analysis import plots

    latin_only = [("sans-serif", set(range(0x250)))]  # a machine without a CJK font
    monkeypatch.setattr(plots, "_installed_fonts", lambda: iter(latin_only))
    monkeypatch.setattr(plots, "_warned_about", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(2):
            plots.plot_attention(np.eye(3), ["a", "b", "c"], ["日本", "語", "です"], str(tmp_path / f"{i}.png"))
    assert_png(tmp_path / "1.png")
    said = [r.getMessage() for r in caplog.records if "fonts-noto-cjk" in r.getMessage()]
    assert len(said) == 1 and "drawn as boxes" in said[0]
    assert not [w for w in caught if "missing from font" in str(w.message)]


def test_the_fonts_for_labels_are_the_default_then_those_that_have_what_it_lacks():
    from fairseq_luong.analysis.plots import covering_families, label_font

    latin, cjk = set(range(0x250)) | {0x2581}, set(range(0x250)) | set(range(0x3040, 0x30FF)) | set(range(0x4E00, 0x9FFF))
    fonts = [("sans-serif", latin), ("IPAexGothic", cjk)]
    assert covering_families(set("über"), fonts) == ["sans-serif"]
    # KFTT's SentencePiece pieces: "▁" only the default has, the kana and kanji only IPAexGothic
    assert covering_families(set("▁日本語です"), fonts) == ["sans-serif", "IPAexGothic"]
    assert covering_families(set("▁日本語です"), fonts[:1]) is None
    assert covering_families(set("日本語"), [("sans-serif", latin), ("other", latin), ("IPAexGothic", cjk)]) == [
        "sans-serif", "IPAexGothic"]
    assert label_font(["über", "ß"]) == ["sans-serif"]  # the default font, on any machine
    # the packaged IPAexGothic (requirements.txt: matplotlib-fontja) after the default, never a
    # "Last Resort" font (a box for every character)
    families = label_font(["▁日本", "です"])
    assert families == ["sans-serif", "IPAexGothic"]


def test_a_heat_map_of_japanese_pieces_draws_every_glyph(tmp_path, caplog, monkeypatch):
    """KFTT's source pieces ("▁" and kanji) with the fonts installed here (IPAexGothic from
    requirements.txt): no glyph is missing, so none is drawn as a box."""
    import warnings

    import numpy as np

    from fairseq_luong.analysis import plots

    monkeypatch.setattr(plots, "_warned_about", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plots.plot_attention(np.eye(3), ["▁京都", "▁市", "です"], ["▁kyoto", "▁city", "."], str(tmp_path / "a.png"))
    assert_png(tmp_path / "a.png")
    assert not [w for w in caught if "missing from font" in str(w.message)], [str(w.message) for w in caught]
    assert not [r for r in caplog.records if "drawn as boxes" in r.getMessage()]


def test_a_validation_at_a_mid_epoch_save_sits_between_the_epochs(tmp_path, capsys):
    """--save-interval-updates scores the valid set between two epochs' ends: against epochs it
    is placed by the part of its epoch trained (epochs of 4 updates: update 6 is epoch 1.5),
    not on its epoch's end."""
    log = tmp_path / "train.log"
    log.write_text("""\
2026-12-07 13:00:01 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 6.5 | ppl 90 | num_updates 2
2026-12-07 13:00:02 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 6.3 | ppl 80 | num_updates 4
2026-12-07 13:00:02 | INFO | train | epoch 001 | loss 6.4 | ppl 83.9 | num_updates 4 | wall 9
2026-12-07 13:00:03 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 6.0 | ppl 60 | num_updates 6
2026-12-07 13:00:04 | INFO | valid | epoch 002 | valid on 'valid' subset | loss 6.1 | ppl 70 | num_updates 8
2026-12-07 13:00:04 | INFO | train | epoch 002 | loss 6.1 | ppl 68.6 | num_updates 8 | wall 18
""", encoding="utf-8")
    png = tmp_path / "curves.png"
    script("plot_curves")["main"]([str(log), "--x", "epochs", "--png", str(png)])
    assert "| train | 4 | 60.00 | 1.5 | 70.00 |" in capsys.readouterr().out
    assert_png(png)
