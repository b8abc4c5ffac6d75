#!/usr/bin/env bash
# Multi30k English->German: the whole pipeline at small scale, every system 2 x 256 with
# the same wall-clock training budget (fairseq-train --stop-time-hours).
#
#   bash examples/multi30k_en_de/run.sh [OPTIONS] prepare        SentencePiece, fairseq-preprocess
#   bash examples/multi30k_en_de/run.sh [OPTIONS] train NAME     train one system
#   bash examples/multi30k_en_de/run.sh [OPTIONS] translate NAME average checkpoints, translate test
#   bash examples/multi30k_en_de/run.sh [OPTIONS] eval NAME      valid ppl, sacreBLEU, attention heat map
#   bash examples/multi30k_en_de/run.sh [OPTIONS] all            all of it for --systems, then table
#   bash examples/multi30k_en_de/run.sh [OPTIONS] table          results so far (WORK/results.md), BLEU
#                                                                by length (WORK/bleu_by_length.{md,png}),
#                                                                learning curves (WORK/curves.{md,png})
#
# Options:
#   --data-dir DIR    {train,valid,test}.{en,de}, raw text (default: ../shared/data/multi30k_en_de
#                     beside the checkout; see README.md for where to get Multi30k)
#   --work-dir DIR    everything goes here (default: runs/multi30k_en_de in the checkout)
#   --minutes M       training budget of each system, wall clock (default: 10)
#   --systems "A B"   systems for `all` and `table` (default: luong_global_general luong_localp
#                     luong_base lstm); also known: rnnsearch
#   --vocab N         joint SentencePiece vocabulary (default: 8000)
#   --average N       average the last N checkpoints (saved every --save-every updates; default 2)
#   --save-every N    save (and validate) every N updates (default: 200; the last 10 are kept)
#   --seed N          (default: 1)
#   --heatmap-line N  the test sentence (1-based line of test.en) whose attention eval draws
#                     (default: 2)
#   -- ARGS           after `train NAME`: extra fairseq-train options for that system
#
# Every step is resumable: finished steps are skipped, an interrupted training resumes
# with the budget it has left; a system trained with other options is refused (delete
# its folder under WORK/systems or use another --work-dir).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
RECIPE=multi30k

DATA="$REPO/../shared/data/multi30k_en_de" WORK="$REPO/runs/multi30k_en_de"
MINUTES=10 SYSTEMS="luong_global_general luong_localp luong_base lstm"
VOCAB=8000 AVERAGE=2 KEEP=10 SAVE_EVERY=200 SEED=1 BEAM=5 LENPEN=1.0 HEATMAP_LINE=2 DROPOUT=0.3
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; }  # the header comment
source "$REPO/examples/common/recipe.sh"
declare -A OPTS=([--data-dir]=DATA [--work-dir]=WORK [--minutes]=MINUTES [--systems]=SYSTEMS
                 [--vocab]=VOCAB [--average]=AVERAGE [--save-every]=SAVE_EVERY [--seed]=SEED
                 [--heatmap-line]=HEATMAP_LINE)
parse_options "$@"
set -- "${POS[@]+"${POS[@]}"}"
check_number --minutes "$MINUTES" positive "the training time of each system in minutes"
check_number --vocab "$VOCAB" count "the size of the SentencePiece vocabulary"
check_number --average "$AVERAGE" count "the number of checkpoints to average"
check_number --save-every "$SAVE_EVERY" count "the updates between two saves"
check_number --seed "$SEED" integer "the random seed"
check_number --heatmap-line "$HEATMAP_LINE" count "a line of test.en (1-based)"
recipe_init
(( KEEP < AVERAGE )) && KEEP=$AVERAGE
SIZE=(--encoder-embed-dim 256 --decoder-embed-dim 256 --encoder-hidden-size 256
      --decoder-hidden-size 256 --share-all-embeddings)

# system_flags NAME: MODEL=(the model's fairseq-train options), 2 x 256 everywhere
system_flags() {
  case "$1" in
    luong_global_general|luong_localp|luong_base)
      # --init-uniform 0.1: the paper's initialisation (and fairseq lstm's for its LSTMs).
      # --encoder-memory-dropout: dropout on the encoder's top outputs (the attention memory),
      # off by default since the paper and the authors' code have none there; fairseq's lstm
      # has it (its dropout_out), and this benchmark was tuned with it: this recipe measures
      # quality, it does not replicate the paper (examples/luong2015_in_form does)
      MODEL=(--arch "$1" "${SIZE[@]}" --encoder-layers 2 --decoder-layers 2 --init-uniform 0.1
             --encoder-memory-dropout "$DROPOUT") ;;
    lstm)
      # fairseq's own: Luong global attention, general score, input feeding (its default)
      MODEL=(--arch lstm "${SIZE[@]}" --encoder-layers 2 --decoder-layers 2
             --decoder-out-embed-dim 256 --decoder-attention 1) ;;
    rnnsearch)
      # Bahdanau et al.: 256 GRU units per direction and in the decoder, 256 alignment
      # units, 256 maxout units (tied output), the paper's initialisation; --dropout acts on
      # its embeddings and maxout output (it has no dropout on the annotations)
      MODEL=(--arch rnnsearch "${SIZE[@]}" --attention-dim 256 --maxout-dim 256) ;;
    *) die "unknown system '$1' (known: luong_global_general luong_localp luong_base lstm rnnsearch)" ;;
  esac
}
for s in $SYSTEMS; do system_flags "$s"; done  # an unknown --systems name stops here, before any work

# Training settings shared by every system (README.md says why)
TRAIN=(--dropout "$DROPOUT" --criterion fused_label_smoothed_cross_entropy --label-smoothing 0.1
       --optimizer adam --adam-betas "(0.9, 0.98)" --lr 0.002 --lr-scheduler inverse_sqrt
       --warmup-updates 500 --clip-norm 1.0 --max-tokens 2000 --max-epoch 1000
       --save-interval-updates "$SAVE_EVERY" --keep-interval-updates "$KEEP"
       --no-epoch-checkpoints --log-interval 100 --seed "$SEED")

prepare() {
  local split lang
  for split in train valid test; do
    for lang in en de; do
      need_file "$DATA/$split.$lang" "give --data-dir with {train,valid,test}.{en,de}: Multi30k task 1 \
(github multi30k/dataset, data/task1/raw; test = test_2016_flickr), see examples/multi30k_en_de/README.md"
    done
  done
  local key; key="vocab $VOCAB data: $(data_key "$DATA"/{train,valid,test}.{en,de})"
  same_or_refuse "$WORK/prepared.options" "$key" "$WORK (prepared data)"
  fresh "$BIN/.done" "$key" && return
  local t0=$SECONDS
  python "$REPO/scripts/data/check_parallel.py" --trainpref "$DATA/train" --validpref "$DATA/valid" \
    --testpref "$DATA/test" -s en -t de >&2
  mkdir -p "$WORK/spm"
  say "SentencePiece: one joint unigram model of at most $VOCAB pieces"
  python "$REPO/examples/common/spm_tool.py" train --input "$DATA/train.en,$DATA/train.de" \
    --model-prefix "$WORK/spm/joint" --vocab-size "$VOCAB" --character-coverage 1.0
  for split in train valid test; do
    for lang in en de; do
      python "$REPO/examples/common/spm_tool.py" encode --model "$WORK/spm/joint.model" \
        < "$DATA/$split.$lang" > "$WORK/spm/$split.$lang"
    done
  done
  say "fairseq-preprocess (joined dictionary; log: $WORK/preprocess.log)"
  rm -rf "$BIN"
  fairseq-preprocess -s en -t de --trainpref "$WORK/spm/train" --validpref "$WORK/spm/valid" \
    --testpref "$WORK/spm/test" --destdir "$BIN" --joined-dictionary --workers "$(nproc)" \
    > "$WORK/preprocess.log" 2>&1 || { tail -20 "$WORK/preprocess.log" >&2; die "fairseq-preprocess failed"; }
  touch "$BIN/.done"; stamp "$BIN/.done" "$key"
  say "prepared in $((SECONDS - t0)) s: $BIN"
}

train() {
  local name="$1"; shift
  prepared
  system_flags "$name"
  local hours; hours=$(python -c "print(f'{$MINUTES / 60:.6f}')")
  train_system "$name" "$BIN" "$(cat "$BIN/.done.key")" "${MODEL[@]}" "${TRAIN[@]}" \
    --stop-time-hours "$hours" "$@"
}

has_attention() { [[ "$1" != luong_base ]]; }

translate_system() {
  local name="$1" dir="$WORK/systems/$1"
  prepared
  [[ -f "$dir/trained" ]] || die "train $name first (bash $0 train $name)"
  average_last "$name" "$AVERAGE"
  local align=(); has_attention "$name" && align=(--print-alignment)
  translate "$name" "$BIN" "$dir/model.pt" "$DATA/test.de" "$dir/test" --gen-subset test --beam "$BEAM" \
    --lenpen "$LENPEN" --batch-size 128 --post-process sentencepiece "${align[@]}"
}

# heatmap NAME: WORK/systems/NAME/attention_LINE.png, the attention of the averaged model
# translating test line HEATMAP_LINE (beam search), SentencePiece pieces on both axes
heatmap() {
  local name="$1" dir="$WORK/systems/$1"
  local png="$dir/attention_$HEATMAP_LINE.png" key; key="$(cat "$dir/model.pt.key") line $HEATMAP_LINE beam $BEAM"
  fresh "$png" "$key" && return
  python "$REPO/scripts/eval/plot_attention.py" "$BIN" --path "$dir/model.pt" --source "$DATA/test.en" \
    --lines "$HEATMAP_LINE" --beam "$BEAM" --spm-model "$WORK/spm/joint.model" --out-dir "$dir" \
    > "$dir/attention.log" 2>&1 || { tail -20 "$dir/attention.log" >&2; die "plot_attention.py failed for $name"; }
  stamp "$png" "$key"
}

evaluate() {
  local name="$1" dir="$WORK/systems/$1"
  translate_system "$name"
  validate_model "$name" "$BIN" --max-tokens 4000
  python "$TOOLS" curve "$dir/train.log" > "$dir/curve.tsv"
  echo -n "$name test sacreBLEU: " >&2
  score "$dir/test.hyp" "$DATA/test.de" "$dir/bleu.json" >&2
  if has_attention "$name"; then
    heatmap "$name"
    say "$name: attention heat map of test line $HEATMAP_LINE: $dir/attention_$HEATMAP_LINE.png"
  fi
}

# table: the systems' results (WORK/results.md), BLEU by source length of the translated
# ones (WORK/bleu_by_length.{md,png}), learning curves of the trained ones: valid ppl
# against updates and against wall-clock minutes (WORK/curves.{md,png})
table() {
  local s translated=() trained=() maps=()
  mkdir -p "$WORK"
  for s in $SYSTEMS; do
    [[ -f "$WORK/systems/$s/test.hyp" ]] && translated+=("$s=$WORK/systems/$s/test.hyp")
    grep -qs "| valid |" "$WORK/systems/$s/train.log" && trained+=("$s=$WORK/systems/$s/train.log")
    [[ -f "$WORK/systems/$s/attention_$HEATMAP_LINE.png" ]] && maps+=("$WORK/systems/$s/attention_$HEATMAP_LINE.png")
  done
  # shellcheck disable=SC2086
  python "$TOOLS" table "$WORK" $SYSTEMS | tee "$WORK/results.md"
  if (( ${#translated[@]} )); then
    echo
    report bleu_by_length.py "$WORK/bleu_by_length" python "$REPO/scripts/eval/bleu_by_length.py" \
      "${translated[@]}" --source "$DATA/test.en" --reference "$DATA/test.de" \
      --png "$WORK/bleu_by_length.png" --edges 10 15 20 25 30
  fi
  if (( ${#trained[@]} )); then
    echo
    report plot_curves.py "$WORK/curves" python "$REPO/scripts/eval/plot_curves.py" "${trained[@]}" \
      --x updates minutes --png "$WORK/curves.png"
  fi
  echo
  say "results: $WORK/results.md"
  (( ${#translated[@]} )) && say "BLEU by source length: $WORK/bleu_by_length.md, $WORK/bleu_by_length.png"
  (( ${#trained[@]} )) && say "learning curves: $WORK/curves.md, $WORK/curves.png"
  (( ${#maps[@]} )) && say "attention heat maps (test line $HEATMAP_LINE): ${maps[*]}"
  return 0
}

cmd="${1:-}"; [[ $# -gt 0 ]] && shift
case "$cmd" in
  prepare) prepare ;;
  train) [[ $# -eq 1 ]] || { usage; exit 2; }; train "$1" "${EXTRA[@]+"${EXTRA[@]}"}" ;;
  translate) [[ $# -eq 1 ]] || { usage; exit 2; }; translate_system "$1" ;;
  eval) [[ $# -eq 1 ]] || { usage; exit 2; }; evaluate "$1" ;;
  all)
    prepare
    for s in $SYSTEMS; do train "$s"; done
    for s in $SYSTEMS; do evaluate "$s"; done
    table ;;
  table) table ;;
  *) usage; exit 2 ;;
esac
