#!/usr/bin/env bash
# The main job: set everything up, then preprocess -> train -> translate -> score.
#
#   bash run.sh                      # the built-in synthetic English->German number corpus
#   bash run.sh --trainpref data/train --validpref data/valid --testpref data/test \
#               --source-lang en --target-lang de [--arch luong_localp] [--updates N | --minutes M]
#   bash run.sh --print-train-options   # the fairseq-train options it uses, one a line
#
# With no data options it generates a synthetic corpus (scripts/data/make_number_corpus.py),
# where German puts the units before the tens ("twenty one" -> "ein und zwanzig"), so
# attention and reordering matter. It trains a small model (128 units, see
# train_options below) for --updates updates (default 600, about two minutes on two
# cores; with --minutes M it also stops after M minutes of training), translates the test
# set with fairseq-generate (beam 5, --print-alignment), and prints sacreBLEU (against the
# test target file itself, never fairseq's T- lines, which hold <<unk>> for rare words)
# and a few translations with their alignments. Everything goes to --work-dir (default:
# work_dir/). Your own files must be tokenised the way you want them scored (one
# sentence a line, line-aligned); for real data, see the README's step-by-step recipe.
set -euo pipefail
REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

TRAINPREF="" VALIDPREF="" TESTPREF="" SRC=en TGT=de
ARCH=luong_global_general UPDATES=600 MINUTES="" WORK="$REPO/work_dir" SEED=1 EXTRA=() PRINT=0
usage() { sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; }
die() { echo "run.sh: $*" >&2; exit 2; }
while [[ $# -gt 0 ]]; do
  case "$1" in --*pref|--source-lang|-s|--target-lang|-t|--arch|--updates|--minutes|--work-dir|--seed)
    [[ $# -ge 2 ]] || die "$1 needs a value (see --help)" ;;
  esac
  case "$1" in
    --trainpref) TRAINPREF="$2"; shift 2 ;;
    --validpref) VALIDPREF="$2"; shift 2 ;;
    --testpref) TESTPREF="$2"; shift 2 ;;
    --source-lang|-s) SRC="$2"; shift 2 ;;
    --target-lang|-t) TGT="$2"; shift 2 ;;
    --arch) ARCH="$2"; shift 2 ;;
    --updates) UPDATES="$2"; shift 2 ;;
    --minutes) MINUTES="$2"; shift 2 ;;
    --print-train-options) PRINT=1; shift ;;
    --work-dir) WORK="$2"; shift 2 ;;
    --seed) SEED="$2"; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;   # anything after -- goes to fairseq-train
    -h|--help) usage; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ "$UPDATES" =~ ^[1-9][0-9]*$ ]] || die "--updates $UPDATES: give the number of updates, a positive whole number such as 600"
[[ -z "$MINUTES" || ( "$MINUTES" =~ ^[0-9]*\.?[0-9]+$ && ! "$MINUTES" =~ ^0*\.?0*$ ) ]] \
  || die "--minutes $MINUTES: give the training time in minutes, a positive number such as 1.5"
[[ "$SEED" =~ ^[0-9]+$ ]] || die "--seed $SEED: give a non-negative integer"
[[ -n "$SRC" && -n "$TGT" && "$SRC" != "$TGT" ]] || die "--source-lang and --target-lang must differ"

# The model and how it learns: one place, printed by --print-train-options for
# tests/test_learning.py, which checks that these settings still learn.
TRAIN_OPTIONS=(--arch "$ARCH"
  --encoder-embed-dim 128 --encoder-hidden-size 128 --decoder-embed-dim 128 --decoder-hidden-size 128
  --encoder-bidirectional --no-input-feed --init-uniform 0 --share-all-embeddings --dropout 0.1
  --optimizer adam --lr 0.003 --clip-norm 1.0 --max-tokens 3000
  --criterion fused_label_smoothed_cross_entropy --label-smoothing 0.1)
if (( PRINT )); then printf '%s\n' "${TRAIN_OPTIONS[@]}"; exit 0; fi

source "$REPO/scripts/setup.sh"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}" PYTHONWARNINGS=ignore
mkdir -p "$WORK"
# inside the current folder, paths print relative to it (work_dir/raw/..., as the README shows)
case "$(cd "$WORK" && pwd)/" in "$PWD"/*) WORK="$(realpath --relative-to=. "$WORK")" ;; esac
T0=$(date +%s)

if [[ -z "$TRAINPREF" ]]; then
  if [[ -n "$VALIDPREF$TESTPREF" ]]; then
    echo "run.sh: --validpref/--testpref need --trainpref" >&2; exit 2
  fi
  python "$REPO/scripts/data/make_number_corpus.py" --out "$WORK/raw" --seed "$SEED"
  TRAINPREF="$WORK/raw/train" VALIDPREF="$WORK/raw/valid" TESTPREF="$WORK/raw/test" SRC=en TGT=de
fi
[[ -n "$VALIDPREF" && -n "$TESTPREF" ]] || { echo "run.sh: give --validpref and --testpref too" >&2; exit 2; }
python "$REPO/scripts/data/check_parallel.py" -s "$SRC" -t "$TGT" \
  --trainpref "$TRAINPREF" --validpref "$VALIDPREF" --testpref "$TESTPREF"

echo "== fairseq-preprocess" >&2
rm -rf "$WORK/bin"
fairseq-preprocess --source-lang "$SRC" --target-lang "$TGT" \
  --trainpref "$TRAINPREF" --validpref "$VALIDPREF" --testpref "$TESTPREF" \
  --destdir "$WORK/bin" --joined-dictionary --workers 2 > "$WORK/preprocess.log" 2>&1 \
  || { tail -20 "$WORK/preprocess.log" >&2; exit 1; }

BUDGET=(--max-update "$UPDATES") ABOUT="$UPDATES updates"
if [[ -n "$MINUTES" ]]; then
  BUDGET+=(--stop-time-hours "$(python -c "print($MINUTES / 60)")") ABOUT+=" or $MINUTES minutes"
fi
echo "== fairseq-train --arch $ARCH, $ABOUT (log: $WORK/train.log)" >&2
rm -rf "$WORK/checkpoints"
fairseq-train "$WORK/bin" --user-dir "$REPO/fairseq_luong" "${TRAIN_OPTIONS[@]}" "${BUDGET[@]}" \
  --max-epoch 1000 --save-dir "$WORK/checkpoints" --no-epoch-checkpoints \
  --log-format simple --log-interval 100 --seed "$SEED" \
  "${EXTRA[@]+"${EXTRA[@]}"}" > "$WORK/train.log" 2>&1 || { tail -30 "$WORK/train.log" >&2; exit 1; }
grep -E "\| valid on" "$WORK/train.log" | tail -2 >&2 || true
# the budget can end between two validations: checkpoint_last is the latest model
CKPT="$WORK/checkpoints/checkpoint_last.pt"

echo "== fairseq-generate (beam 5, --print-alignment)" >&2
fairseq-generate "$WORK/bin" --user-dir "$REPO/fairseq_luong" --path "$CKPT" \
  --gen-subset test --beam 5 --batch-size 64 --print-alignment > "$WORK/generate.out" 2> "$WORK/generate.log" \
  || { tail -30 "$WORK/generate.log" >&2; exit 1; }
# scored against the test set's own target file: fairseq's T- lines have <<unk>> for rare words
python "$REPO/scripts/eval/report_translations.py" "$WORK/generate.out" --ref "$TESTPREF.$TGT" --examples 3
if [[ -f "$WORK/raw/lexicon.tsv" && "$TESTPREF" == "$WORK/raw/test" ]]; then  # the synthetic corpus
  python "$REPO/scripts/eval/lexicon_alignment.py" "$WORK/generate.out" --source "$TESTPREF.$SRC" \
    --lexicon "$WORK/raw/lexicon.tsv"
fi
echo "total wall time: $(( $(date +%s) - T0 )) s ($ABOUT); outputs in $WORK" >&2
