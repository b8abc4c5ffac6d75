#!/usr/bin/env bash
# IWSLT'15 English->Vietnamese (TED, the Stanford release of Luong & Manning 2015): the
# paper's model beside the published systems that report this benchmark (TensorFlow NMT,
# Joey NMT), with their vocabularies and their scoring.
#
#   bash examples/iwslt15_en_vi/run.sh [OPTIONS] prepare      vocabularies (words seen >= 5 times:
#                                                             17,188 English, 7,706 Vietnamese),
#                                                             pairs of <= 50 words, binarize
#   bash examples/iwslt15_en_vi/run.sh [OPTIONS] train NAME   train one system (resumes from its
#                                                             last checkpoint)
#   bash examples/iwslt15_en_vi/run.sh [OPTIONS] eval NAME    choose the checkpoint average, beam and
#                                                             length penalty on tst2012, translate
#                                                             tst2013 once; tokenised BLEU (the
#                                                             anchors'), sacreBLEU on detokenised
#                                                             text, with and without --replace-unk;
#                                                             learning curve, attention heat map
#   bash examples/iwslt15_en_vi/run.sh [OPTIONS] table        the results beside the anchors
#                                                             (WORK/results.md), BLEU by length,
#                                                             learning curves
#   bash examples/iwslt15_en_vi/run.sh [OPTIONS] publish      copy what anyone can re-score into
#                                                             --results: each evaluated system's
#                                                             tst2012/tst2013 translations
#                                                             (NAME.tst2013.hyp: the chosen beam;
#                                                             .greedy.hyp, .unk.hyp), final.json,
#                                                             training log, curve, heat map, and
#                                                             the table's files
#   bash examples/iwslt15_en_vi/run.sh [OPTIONS] restore [NAME...]  publish's inverse: each
#                                                             system published in --results (default:
#                                                             those of --systems) into WORK, for
#                                                             table and publish only (no checkpoints),
#                                                             beside systems trained in WORK
#   bash examples/iwslt15_en_vi/run.sh [OPTIONS] all [NAME...]  all of it (default: --systems)
#   bash examples/iwslt15_en_vi/run.sh [OPTIONS] options NAME  NAME's fairseq-train options, one a line
#                                                             (what train runs, data folder and
#                                                             --save-dir aside)
#
# Systems: luong_global_general (the paper's model: global attention, general score, input
# feeding), lstm (fairseq's own), luong_localp, rnnsearch; NAME.sN is NAME trained with seed N
# (NAME alone: --seed). Ensembles, for eval only: ensemble (luong_global_general with
# luong_localp, the paper's section 4.2 ensemble of attention types: eval after both) and
# ensemble_all (every system of ours evaluated in WORK, seeds included; not lstm).
#
# Options:
#   --data-dir DIR    train.{en,vi} (or train.{en,vi}.xz), tst2012.{en,vi}, tst2013.{en,vi}, as
#                     the Stanford release (default: ../shared/data/iwslt15_en_vi beside the checkout)
#   --work-dir DIR    everything goes here (default: runs/iwslt15_en_vi in the checkout); a
#                     training outlasts a session: give a folder that survives it
#   --systems "A B"   systems for `all` and `table` (default: luong_global_general lstm)
#   --max-epoch N     the budget: every system trains N epochs (default: 20); a larger N for
#                     a system trained with a smaller one trains it on from its last
#                     checkpoint, as if it had had N from the start
#   --save-every N    also save the training every N updates (default: 200, about a tenth of an
#                     hour on 2 CPU cores; an epoch is about 726): a training stopped between two
#                     epochs resumes from there, mid-epoch, losing at most N updates
#   --hours H         also stop a training after H hours of fairseq-train's clock (default: none,
#                     so that a slower machine does not shorten one system's budget)
#   --precision P     float32 (default: the paper's, and on a CPU without bf16 arithmetic 2.7x
#                     as fast as amp) or amp (bfloat16 autocast, float32 weights: for a GPU or
#                     a CPU with AMX or AVX512-BF16)
#   --units N         embedding and hidden size (default: 512, the anchors')
#   --averages "A B"  candidates for the final model: the average of the last A epochs' weights
#                     (1: the last epoch's) or "best" (checkpoint_best.pt) (default: "best 1 3 5")
#   --beams "A B"     beam sizes tried on tst2012 (default: "5 10"); greedy is scored too
#   --lenpens "A B"   length penalties tried on tst2012 (default: "0.6 1.0 1.4")
#   --seed N          the seed of a system named without .sN (default: 1)
#   --heatmap-line N  the tst2013 line (1-based) whose attention eval draws (default: 7)
#   --results DIR     where publish copies to (default: results/ beside this script, committed)
#   -- ARGS           after `train NAME`: extra fairseq-train options (recorded with the model)
#
# Every step is keyed and resumable (examples/common/recipe.sh, "Freshness"): finished steps
# are skipped, an interrupted training resumes from checkpoint_last.pt, a system trained with
# other options or code is refused (RETRAIN=1 trains it again, ACCEPT_CODE=1 keeps it).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
RECIPE=iwslt15

DATA="$REPO/../shared/data/iwslt15_en_vi" WORK="$REPO/runs/iwslt15_en_vi"
SYSTEMS="luong_global_general lstm" HOURS="" PRECISION=float32 MAX_EPOCH=20 SAVE_EVERY=200 UNITS=512 SEED=1 HEATMAP_LINE=7 RESULTS="$HERE/results"
AVERAGES="best 1 3 5" BEAMS="5 10" LENPENS="0.6 1.0 1.4"
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; }  # the header comment
source "$REPO/examples/common/recipe.sh"
declare -A OPTS=([--data-dir]=DATA [--work-dir]=WORK [--systems]=SYSTEMS [--hours]=HOURS [--precision]=PRECISION
                 [--max-epoch]=MAX_EPOCH [--save-every]=SAVE_EVERY [--units]=UNITS [--averages]=AVERAGES [--beams]=BEAMS
                 [--lenpens]=LENPENS [--seed]=SEED [--heatmap-line]=HEATMAP_LINE [--results]=RESULTS)
parse_options "$@"
set -- "${POS[@]+"${POS[@]}"}"
[[ -z "$HOURS" ]] || check_number --hours "$HOURS" positive "a wall-clock limit of each training in hours"
[[ "$PRECISION" == float32 || "$PRECISION" == amp ]] \
  || { echo "run.sh: --precision $PRECISION: give float32 or amp (bfloat16 autocast)" >&2; exit 2; }
check_number --max-epoch "$MAX_EPOCH" count "the most epochs a system trains"
check_number --save-every "$SAVE_EVERY" count "a number of updates between two saves"
check_number --units "$UNITS" count "the embedding and hidden size"
check_number --seed "$SEED" integer "the random seed"
check_number --heatmap-line "$HEATMAP_LINE" count "a line of tst2013.en (1-based)"
(( UNITS % 2 == 0 )) || { echo "run.sh: --units $UNITS: give an even size (the bidirectional encoder has half of it a direction)" >&2; exit 2; }
for a in $AVERAGES; do [[ "$a" == best ]] || check_number --averages "$a" count "\"best\" or a number of epochs to average"; done
for b in $BEAMS; do check_number --beams "$b" count "beam sizes"; done
for l in $LENPENS; do check_number --lenpens "$l" positive "length penalties"; done
[[ -n "$AVERAGES" && -n "$BEAMS" && -n "$LENPENS" ]] || { echo "run.sh: --averages, --beams and --lenpens need at least one value each" >&2; exit 2; }
recipe_init
SRC_LANG=en TGT_LANG=vi
RAW="$WORK/data-raw"  # tst2012 (valid) and tst2013 (test) as text: --replace-unk reads the source words
declare -A SPLIT_FILE=([valid]=tst2012 [test]=tst2013)

# The anchors' vocabularies: every word seen at least THRESHOLD times in train (TF NMT's and
# Joey NMT's vocab.{en,vi}: 17,188 and 7,706 words, and <unk> <s> </s>); no padding words
THRESHOLD=5
# Luong et al. 2015, section 4.1, written once in fairseq_luong/paper_settings/luong2015.py: the
# training pairs of at most 50 words a side (TF NMT trains on 50 words too)
MAX_WORDS="$(python -S -c "import ast,sys; t=ast.parse(open(sys.argv[1]).read()); print(next(n.value.value for n in t.body if isinstance(n, ast.Assign) and getattr(n.targets[0], 'id', '') == 'MAX_WORDS'))" "$REPO/fairseq_luong/paper_settings/luong2015.py")"

# system_flags NAME: MODEL=(the model's fairseq-train options), all at --units (2 layers): the
# encoder bidirectional (UNITS/2 a direction, as TF NMT's and Joey NMT's), the decoder's input
# and output embeddings tied
system_flags() {
  local half=$((UNITS / 2)) base; base="$(base_of "$1")"
  local size=(--encoder-embed-dim "$UNITS" --decoder-embed-dim "$UNITS" --decoder-hidden-size "$UNITS"
              --encoder-bidirectional --encoder-hidden-size "$half" --share-decoder-input-output-embed)
  case "$base" in
    luong_global_general|luong_localp)
      # --encoder-memory-dropout: dropout on the attention memory, as fairseq's lstm has it
      MODEL=(--arch "$base" "${size[@]}" --encoder-layers 2 --decoder-layers 2 --init-uniform 0.1
             --encoder-memory-dropout 0.3) ;;
    lstm)
      # fairseq's own: Luong global attention (general score), input feeding (its defaults)
      MODEL=(--arch lstm "${size[@]}" --encoder-layers 2 --decoder-layers 2
             --decoder-out-embed-dim "$UNITS" --decoder-attention 1) ;;
    rnnsearch)
      # Bahdanau et al. 2014: GRUs, additive attention, maxout; bidirectional by design
      MODEL=(--arch rnnsearch --encoder-embed-dim "$UNITS" --decoder-embed-dim "$UNITS"
             --encoder-hidden-size "$half" --decoder-hidden-size "$UNITS" --attention-dim "$UNITS"
             --maxout-dim "$half" --share-decoder-input-output-embed) ;;
    *) die "unknown system '$1' (known: luong_global_general lstm luong_localp rnnsearch, each also as NAME.sN \
for seed N; ensemble and ensemble_all for eval)" ;;
  esac
}
# base_of NAME: NAME without its seed (.sN); seed_of NAME: N, or --seed for a NAME without one
base_of() { if [[ "$1" =~ ^(.*)\.s([0-9]+)$ ]]; then echo "${BASH_REMATCH[1]}"; else echo "$1"; fi; }
seed_of() { if [[ "$1" =~ \.s([0-9]+)$ ]]; then echo "${BASH_REMATCH[1]}"; else echo "$SEED"; fi; }
ENSEMBLE_OF=(luong_global_general luong_localp)
is_ensemble() { [[ "$1" == ensemble || "$1" == ensemble_all ]]; }
# ensemble_members NAME: ensemble's are ENSEMBLE_OF; ensemble_all's every system of ours (not
# lstm, not restored) that eval chose a model for in WORK, in name order
ensemble_members() {
  if [[ "$1" == ensemble ]]; then printf '%s\n' "${ENSEMBLE_OF[@]}"; return; fi
  local d n
  for d in "$WORK"/systems/*/; do
    n="$(basename "$d")"
    [[ "$(base_of "$n")" != lstm && -f "$d/choice.json" && ! -f "$d/restored" ]] && ! is_ensemble "$n" && echo "$n"
  done | sort
}
check_system() { is_ensemble "$1" || system_flags "$1"; }
for s in $SYSTEMS; do check_system "$s"; done  # an unknown --systems name stops here, before any work

# The protocol every system shares (README.md, "One protocol, one budget", says why): Adam,
# label smoothing, dropout 0.3, the rate halved after each epoch whose tst2012 nll_loss is not
# the best so far (fairseq's reduce_lr_on_plateau, patience 0), and the same budget for all:
# --max-epoch epochs, no early stop (one noisy epoch once ended one system 7 epochs before
# another); the final model (an average of the last epochs, or the best) is chosen on tst2012;
# float32 (--precision amp: bfloat16 autocast, float32 weights). A save every --save-every
# updates (checkpoint_E_U.pt, the newest kept; tst2012 is scored at each) lets a training that
# outlasts its machine resume mid-epoch; the rate changes only at an epoch's end, and each
# update's seed is fairseq's seed + updates, so where it resumes changes nothing it learns
# (checkpoint_best.pt is the best of every tst2012 score, mid-epoch ones included)
TRAIN=(--dropout 0.3 --criterion fused_label_smoothed_cross_entropy --label-smoothing 0.1
       --optimizer adam --adam-betas "(0.9, 0.98)" --lr 0.001 --clip-norm 1.0
       --lr-scheduler reduce_lr_on_plateau --lr-shrink 0.5
       --best-checkpoint-metric nll_loss --max-tokens 4000
       --max-epoch "$MAX_EPOCH" --keep-last-epochs 5 --log-interval 100 --seed "$SEED"
       --save-interval-updates "$SAVE_EVERY" --keep-interval-updates 1
       --skip-invalid-size-inputs-valid-test)
[[ "$PRECISION" == float32 ]] || TRAIN+=(--amp)
# train_flags NAME: TRAIN_NAME=(TRAIN with NAME's seed, in --seed's place)
train_flags() {
  local i; TRAIN_NAME=("${TRAIN[@]}")
  for i in "${!TRAIN_NAME[@]}"; do [[ "${TRAIN_NAME[$i]}" != --seed ]] || TRAIN_NAME[i + 1]="$(seed_of "$1")"; done
}
# --hours: a wall-clock limit only when given
time_limit() { [[ -z "$HOURS" ]] || echo --stop-time-hours "$HOURS"; }

# train_text: the/text/train.{en,vi}, the release's training text (decompressed when it is .xz)
train_text() {
  local l
  for l in $SRC_LANG $TGT_LANG; do
    if [[ -s "$DATA/train.$l" ]]; then echo "$DATA/train.$l"; else echo "$DATA/train.$l.xz"; fi
  done
}
check_data() {
  local f
  for f in $(train_text) "$DATA"/tst2012.{en,vi} "$DATA"/tst2013.{en,vi}; do
    need_file "$f" "give --data-dir with train.{en,vi} (or .xz), tst2012.{en,vi} and tst2013.{en,vi}: \
the Stanford release (nlp.stanford.edu/projects/nmt/, IWSLT'15 English-Vietnamese), see examples/iwslt15_en_vi/README.md"
  done
}
# the prepared data's key: the files and the options (as Multi30k's, no code version: a later
# commit keeps the models trained on it)
prepare_key() {
  printf 'threshold %s max %s words data: %s' "$THRESHOLD" "$MAX_WORDS" \
    "$(data_key $(train_text) "$DATA"/tst2012.{en,vi} "$DATA"/tst2013.{en,vi})"
}

prepare() {
  check_data
  local key; key="$(prepare_key)"
  same_or_refuse "$WORK/prepared.options" "$key" "$WORK (prepared data)"
  fresh "$BIN/.done" "$key" && return
  local t0=$SECONDS f l
  mkdir -p "$WORK/text"
  for f in $(train_text); do
    l="${f%.xz}"; l="${l##*.}"
    if [[ "$f" == *.xz ]]; then xz -dc "$f" > "$WORK/text/full.$l.part"; else cp "$f" "$WORK/text/full.$l.part"; fi
    mv "$WORK/text/full.$l.part" "$WORK/text/full.$l"
  done
  # the release has two C1 characters in train.en (lines 20,839 and 51,057: U+0080, a mojibake
  # euro sign); the anchors trained on it as released, and so do we
  python "$REPO/scripts/data/check_parallel.py" --trainpref "$WORK/text/full" --validpref "$DATA/tst2012" \
    --testpref "$DATA/tst2013" -s $SRC_LANG -t $TGT_LANG --control-characters keep >&2
  say "vocabularies: the words seen at least $THRESHOLD times in all of train (log: $WORK/preprocess.log)"
  rm -rf "$BIN" "$RAW" "$WORK/dicts"
  fairseq-preprocess -s $SRC_LANG -t $TGT_LANG --trainpref "$WORK/text/full" --destdir "$WORK/dicts" \
    --thresholdsrc "$THRESHOLD" --thresholdtgt "$THRESHOLD" --padding-factor 1 --dict-only \
    --workers "$(nproc)" > "$WORK/preprocess.log" 2>&1 \
    || { tail -20 "$WORK/preprocess.log" >&2; die "fairseq-preprocess --dict-only failed"; }
  say "vocabularies: $(wc -l < "$WORK/dicts/dict.en.txt") English, $(wc -l < "$WORK/dicts/dict.vi.txt") Vietnamese words (and <unk> <s> </s>)"
  say "keeping the training pairs of at most $MAX_WORDS words a side (Luong et al. 2015, section 4.1)"
  python "$REPO/examples/wmt14_en_de/filter_pairs.py" "$WORK/text/full.en" "$WORK/text/full.vi" "$WORK/text/train" \
    --src-lang $SRC_LANG --tgt-lang $TGT_LANG --max-words "$MAX_WORDS"
  local dicts=(--srcdict "$WORK/dicts/dict.en.txt" --tgtdict "$WORK/dicts/dict.vi.txt")
  fairseq-preprocess -s $SRC_LANG -t $TGT_LANG --trainpref "$WORK/text/train" --validpref "$DATA/tst2012" \
    --testpref "$DATA/tst2013" "${dicts[@]}" --destdir "$BIN" --workers "$(nproc)" >> "$WORK/preprocess.log" 2>&1 \
    || { tail -20 "$WORK/preprocess.log" >&2; die "fairseq-preprocess failed"; }
  fairseq-preprocess -s $SRC_LANG -t $TGT_LANG --validpref "$DATA/tst2012" --testpref "$DATA/tst2013" \
    "${dicts[@]}" --destdir "$RAW" --dataset-impl raw >> "$WORK/preprocess.log" 2>&1 \
    || { tail -20 "$WORK/preprocess.log" >&2; die "fairseq-preprocess --dataset-impl raw failed"; }
  touch "$RAW/.done" "$BIN/.done"; stamp "$BIN/.done" "$key" "$BIN" "$RAW"
  say "prepared in $((SECONDS - t0)) s: $BIN (valid = tst2012, test = tst2013)"
}

# not_restored NAME: stop when WORK/systems/NAME came from published files (restore: no checkpoints)
not_restored() {
  [[ ! -f "$WORK/systems/$1/restored" ]] \
    || die "$1 in $WORK was restored from published files (no checkpoints): train it in another --work-dir"
}

train() {
  local name="$1"; shift
  ! is_ensemble "$name" || die "$name is not trained: train its members (${ENSEMBLE_OF[*]} for ensemble), then eval $name"
  not_restored "$name"
  prepared
  system_flags "$name"
  train_flags "$name"
  train_system "$name" "$BIN" "$(ident "$BIN/.done")" "${MODEL[@]}" "${TRAIN_NAME[@]}" \
    $(time_limit) "$@"
}

# --------------------------------------------------------------------------
# eval: every choice on tst2012 (valid), then tst2013 (test) translated once per final model

# candidate NAME WHICH: WORK/systems/NAME/candidates/WHICH.pt, "best" (checkpoint_best.pt) or the
# average of the last WHICH epoch checkpoints (1: the last epoch's); made once, stamped
candidate() {
  local name="$1" which="$2" dir="$WORK/systems/$1" out="$WORK/systems/$1/candidates/$2.pt"
  [[ -f "$dir/trained.key" ]] || die "$name: not trained (bash $0 train $name)"
  local key; key="$(printf '%s candidate %s\n%s' "$(ident "$dir/trained")" "$which" "$(code_version average "${CODE_AVERAGE[@]}")")"
  fresh "$out" "$key" && { echo "$out"; return; }
  mkdir -p "$dir/candidates"
  if [[ "$which" == best ]]; then
    cp "$dir/checkpoints/checkpoint_best.pt" "$out"
  else
    local epochs=() c
    mapfile -t epochs < <(ls "$dir"/checkpoints/checkpoint[0-9]*.pt 2>/dev/null | sed 's/.*checkpoint\([0-9]*\)\.pt/\1/' | sort -n)
    (( ${#epochs[@]} >= which )) || die "$name: $which epochs to average, but $dir/checkpoints keeps ${#epochs[@]}"
    local inputs=(); for c in "${epochs[@]: -$which}"; do inputs+=("$dir/checkpoints/checkpoint$c.pt"); done
    python "$REPO/scripts/train/average_checkpoints.py" --inputs "${inputs[@]}" --output "$out" >&2 \
      || die "average_checkpoints.py failed for $name"
  fi
  stamp "$out" "$key"
  echo "$out"
}

# gen_args SPLIT BEAM LENPEN UNK: GEN=(fairseq-generate options); UNK=1 translates from the raw
# text with --replace-unk (the attended source word copied in place of each <unk>)
gen_args() {
  GEN=(--gen-subset "$1" --beam "$2" --lenpen "$3" --batch-size 64 --max-len-a 2 --max-len-b 10)
  (( $4 )) && GEN+=(--dataset-impl raw --replace-unk)
  return 0
}
data_of() { if (( $1 )); then echo "$RAW"; else echo "$BIN"; fi; }

# run_out NAME WHICH SPLIT BEAM LENPEN UNK: the prefix of a translation's files,
# WORK/systems/NAME/runs/SET.WHICH.bBEAM.lpLENPEN[.unk] (WHICH: the candidate model)
run_out() {
  local unk=""; (( $6 )) && unk=.unk
  echo "$WORK/systems/$1/runs/${SPLIT_FILE[$3]}.$2.b$4.lp$5$unk"
}

# run_translation NAME WHICH PATHS SPLIT BEAM LENPEN UNK: translate SPLIT with the model(s) PATHS
# (run_out's files: .hyp, and its tokenised BLEU .tok_bleu.json); prints the BLEU
run_translation() {
  local name="$1" which="$2" paths="$3" split="$4" beam="$5" lp="$6" unk="$7" out
  out="$(run_out "$name" "$which" "$split" "$beam" "$lp" "$unk")"
  mkdir -p "$(dirname "$out")"
  gen_args "$split" "$beam" "$lp" "$unk"
  translate "$name $(basename "$out")" "$(data_of "$unk")" "$paths" "$DATA/${SPLIT_FILE[$split]}.vi" "$out" "${GEN[@]}" >&2
  score "$out.hyp" "$DATA/${SPLIT_FILE[$split]}.vi" "$out.tok_bleu.json" --tokenize none > /dev/null
  json_field "$out.tok_bleu.json" score
}

# better A B: true when BLEU A > B
better() { python -c "import sys; sys.exit(0 if float(sys.argv[1]) > float(sys.argv[2]) else 1)" "$1" "$2"; }

# model_paths NAME: the candidates' paths (for an ensemble: each member's chosen model) as
# "WHICH=PATHS" lines
model_paths() {
  local name="$1" a
  if is_ensemble "$name"; then
    local p="" m members; members="$(ensemble_members "$name")"
    [[ -n "$members" ]] || die "$name: no system of ours is evaluated in $WORK (bash $0 eval NAME)"
    for m in $members; do
      [[ -f "$WORK/systems/$m/choice.json" ]] || die "$name: eval $m first (bash $0 eval $m)"
      p+="${p:+:}$(json_field "$WORK/systems/$m/choice.json" model_path)"
    done
    echo "chosen=$p"; return
  fi
  for a in $AVERAGES; do echo "$a=$(candidate "$name" "$a")"; done
}
json_field() { python -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"; }

# choose NAME: WORK/systems/NAME/choice.json, the model, beam and length penalty with the best
# tokenised BLEU on tst2012: the model at the first beam and length penalty 1.0, then the beam
# and length penalty for that model; --replace-unk is a row of its own. Every candidate tried,
# with its BLEU, is listed in it (candidates), so that anyone can check the choice
choose() {
  local name="$1" dir="$WORK/systems/$1" line which paths bleu tried=()
  local best_which="" best_paths="" best=-1 first_beam; first_beam="$(echo $BEAMS | cut -d' ' -f1)"
  while IFS= read -r line; do
    which="${line%%=*}" paths="${line#*=}"
    bleu="$(run_translation "$name" "$which" "$paths" valid "$first_beam" 1.0 0)"
    say "$name: tst2012, model $which, beam $first_beam, lenpen 1.0: BLEU $bleu"
    tried+=("$which	$first_beam	1.0	$bleu")
    if better "$bleu" "$best"; then best="$bleu" best_which="$which" best_paths="$paths"; fi
  done < <(model_paths "$name")
  local beam lp best_beam="$first_beam" best_lp=1.0
  for beam in $BEAMS; do
    for lp in $LENPENS; do
      [[ "$beam" == "$first_beam" && "$lp" == 1.0 ]] && continue
      [[ -n "$best_paths" ]] || die "$name: no candidate model"
      bleu="$(run_translation "$name" "$best_which" "$best_paths" valid "$beam" "$lp" 0)"
      say "$name: tst2012, model $best_which, beam $beam, lenpen $lp: BLEU $bleu"
      tried+=("$best_which	$beam	$lp	$bleu")
      if better "$bleu" "$best"; then best="$bleu" best_beam="$beam" best_lp="$lp"; fi
    done
  done
  local members=""; ! is_ensemble "$name" || members="$(ensemble_members "$name" | paste -sd' ')"
  printf '%s\n' "${tried[@]}" | python -c "
import json, sys
tried = [dict(zip(('model', 'beam', 'lenpen', 'tst2012_bleu'), l.rstrip('\n').split('\t'))) for l in sys.stdin]
for t in tried:
    t['beam'], t['tst2012_bleu'] = int(t['beam']), float(t['tst2012_bleu'])
choice = dict(model=sys.argv[1], model_path=sys.argv[2], beam=int(sys.argv[3]), lenpen=sys.argv[4],
              tst2012_bleu=float(sys.argv[5]), candidates=tried)
if sys.argv[7]:
    choice['members'] = sys.argv[7].split()  # an ensemble: the systems whose chosen models it averages
json.dump(choice, open(sys.argv[6], 'w'), indent=1)" \
    "$best_which" "$best_paths" "$best_beam" "$best_lp" "$best" "$dir/choice.json" "$members"
  say "$name: chosen on tst2012: model $best_which, beam $best_beam, lenpen $best_lp (BLEU $best)"
}

# detok OUT: OUT.detok, the tokenised OUT.hyp Moses-detokenised (Vietnamese)
detok() {
  local key; key="$(printf '%s\n%s' "$(ident "$1.hyp")" "$(code_version detok "$TOOLS" --dist sacremoses)")"
  fresh "$1.detok" "$key" && return
  python "$TOOLS" detok vi < "$1.hyp" > "$1.detok.part"; mv "$1.detok.part" "$1.detok"; stamp "$1.detok" "$key"
}
# reference_detok SPLIT: WORK/text/SPLIT.detok.vi, the tokenised reference Moses-detokenised the
# same way (the release has no untokenised reference)
reference_detok() {
  local ref="$DATA/${SPLIT_FILE[$1]}.vi" out="$WORK/text/${SPLIT_FILE[$1]}.detok.vi"
  local key; key="$(printf '%s\n%s' "$(data_key "$ref")" "$(code_version detok "$TOOLS" --dist sacremoses)")"
  fresh "$out" "$key" || { python "$TOOLS" detok vi < "$ref" > "$out.part"; mv "$out.part" "$out"; stamp "$out" "$key"; }
  echo "$out"
}

# final NAME: the chosen model translates tst2012 and tst2013 with the chosen beam and length
# penalty, greedy (as the anchors report), and with --replace-unk; WORK/systems/NAME/final.json
final() {
  local name="$1" dir="$WORK/systems/$1" which paths beam lp split unk b out
  which="$(json_field "$dir/choice.json" model)" paths="$(json_field "$dir/choice.json" model_path)"
  beam="$(json_field "$dir/choice.json" beam)"
  lp="$(json_field "$dir/choice.json" lenpen)"
  local rows=()
  for split in valid test; do
    for b in 1 "$beam"; do
      for unk in 0 1; do
        (( b == 1 && unk == 1 )) && continue
        local blp="$lp"; (( b == 1 )) && blp=1.0
        local bleu; bleu="$(run_translation "$name" "$which" "$paths" "$split" "$b" "$blp" "$unk")"
        out="$(run_out "$name" "$which" "$split" "$b" "$blp" "$unk")"
        detok "$out"
        local sb; score "$out.detok" "$(reference_detok "$split")" "$out.sacrebleu.json" > /dev/null
        sb="$(json_field "$out.sacrebleu.json" score)"
        say "$name: ${SPLIT_FILE[$split]} beam $b lenpen $blp$( (( unk )) && echo ' +unk' || true): BLEU $bleu (sacreBLEU detokenised $sb)"
        rows+=("${SPLIT_FILE[$split]}	$b	$blp	$unk	$bleu	$sb	$out.hyp")
      done
    done
  done
  printf '%s\n' "${rows[@]}" | python -c "
import json, sys
rows = [dict(zip(('set', 'beam', 'lenpen', 'unk', 'bleu', 'sacrebleu', 'hyp'), l.rstrip('\n').split('\t'))) for l in sys.stdin]
choice = json.load(open(sys.argv[1]))
json.dump(dict(choice=choice, rows=rows), open(sys.argv[2], 'w'), indent=1)" "$dir/choice.json" "$dir/final.json"
}

# heatmap NAME: WORK/systems/NAME/attention_LINE.png, the chosen model's attention translating
# tst2013 line HEATMAP_LINE with the chosen beam
heatmap() {
  local name="$1" dir="$WORK/systems/$1"
  local paths beam; paths="$(json_field "$dir/choice.json" model_path)" beam="$(json_field "$dir/choice.json" beam)"
  local png="$dir/attention_$HEATMAP_LINE.png" key
  key="$(printf 'models %s line %s beam %s\n%s' "$paths" "$HEATMAP_LINE" "$beam" "$(ident "$dir/choice.json")")"
  fresh "$png" "$key" && return
  python "$REPO/scripts/eval/plot_attention.py" "$BIN" --path "$paths" --source "$DATA/tst2013.en" \
    --lines "$HEATMAP_LINE" --beam "$beam" --out-dir "$dir" > "$dir/attention.log" 2>&1 \
    || { tail -20 "$dir/attention.log" >&2; die "plot_attention.py failed for $name"; }
  stamp "$png" "$key"
}

evaluate() {
  local name="$1" dir="$WORK/systems/$1"
  check_system "$name"
  not_restored "$name"
  prepared
  mkdir -p "$dir"
  is_ensemble "$name" || [[ -f "$dir/trained" ]] || die "train $name first (bash $0 train $name)"
  choose "$name"
  final "$name"
  is_ensemble "$name" || python "$TOOLS" curve "$dir/train.log" > "$dir/curve.tsv"
  is_ensemble "$name" || heatmap "$name"
}

# table: WORK/results.md (the systems beside the anchors), WORK/significance.md (the paired
# bootstrap against lstm), WORK/bleu_by_length.{md,png}, WORK/curves.{md,png}
table() {
  local s finals=() by_length=() trained=()
  mkdir -p "$WORK"
  for s in $SYSTEMS; do
    [[ -f "$WORK/systems/$s/final.json" ]] || continue
    finals+=("$s=$WORK/systems/$s/final.json")
    by_length+=("$s=$(python "$HERE/results.py" hyp "$WORK/systems/$s/final.json" tst2013)")
  done
  for s in $SYSTEMS; do
    grep -qs "| valid |" "$WORK/systems/$s/train.log" && trained+=("$s=$WORK/systems/$s/train.log")
  done
  python "$HERE/results.py" table "${finals[@]+"${finals[@]}"}" --work "$WORK" --data "$DATA" | tee "$WORK/results.md"
  # the paired bootstrap on tst2013: every system against lstm (the baseline, first)
  local paired=() f
  for f in "${finals[@]+"${finals[@]}"}"; do [[ "${f%%=*}" == lstm ]] && paired=("$f"); done
  for f in "${finals[@]+"${finals[@]}"}"; do [[ "${f%%=*}" == lstm ]] || paired+=("$f"); done
  if [[ "${paired[0]:-}" == lstm=* && ${#paired[@]} -gt 1 ]]; then
    echo
    python "$HERE/results.py" significance "${paired[@]}" --data "$DATA" --out "$WORK/significance.md"
  else
    rm -f "$WORK/significance.md"
  fi
  if (( ${#by_length[@]} )); then
    echo
    report bleu_by_length.py "$WORK/bleu_by_length" python "$REPO/scripts/eval/bleu_by_length.py" \
      "${by_length[@]}" --source "$DATA/tst2013.en" --reference "$DATA/tst2013.vi" --tokenize none \
      --png "$WORK/bleu_by_length.png" --edges 10 20 30 40 50 60
  fi
  if (( ${#trained[@]} )); then
    echo
    report plot_curves.py "$WORK/curves" python "$REPO/scripts/eval/plot_curves.py" "${trained[@]}" \
      --x epochs minutes --png "$WORK/curves.png"
  fi
  say "results: $WORK/results.md"
}

# publish: --results gets what anyone can re-score (results.py publish), for each system of
# --systems that eval finished, and the table's files
publish() {
  local s finals=()
  for s in $SYSTEMS; do
    [[ -f "$WORK/systems/$s/final.json" ]] && finals+=("$s=$WORK/systems/$s/final.json")
  done
  (( ${#finals[@]} )) || die "nothing to publish: no system of --systems \"$SYSTEMS\" is evaluated (bash $0 eval NAME)"
  python "$HERE/results.py" publish "${finals[@]}" --work "$WORK" --data "$DATA" --results "$RESULTS" > /dev/null
  say "published ${#finals[@]} system(s) to $RESULTS"
}

# restore [NAME...]: WORK/systems/NAME from the files publish wrote into --results (results.py
# restore), for each NAME (default: each system of --systems published there)
restore() {
  local names=("$@") s
  if (( ! ${#names[@]} )); then
    for s in $SYSTEMS; do [[ -f "$RESULTS/$s.final.json" ]] && names+=("$s"); done
    (( ${#names[@]} )) || die "nothing to restore: no system of --systems \"$SYSTEMS\" is published in $RESULTS"
  fi
  python "$HERE/results.py" restore "${names[@]}" --results "$RESULTS" --work "$WORK" > /dev/null
  say "restored ${names[*]} from $RESULTS into $WORK/systems (table and publish only)"
}

cmd="${1:-}"; [[ $# -gt 0 ]] && shift
case "$cmd" in
  prepare) prepare ;;
  train) [[ $# -eq 1 ]] || { usage; exit 2; }; train "$1" "${EXTRA[@]+"${EXTRA[@]}"}" ;;
  eval) [[ $# -eq 1 ]] || { usage; exit 2; }; evaluate "$1" ;;
  all)
    names=("$@"); (( ${#names[@]} )) || read -r -a names <<< "$SYSTEMS"
    for s in "${names[@]}"; do check_system "$s"; done
    prepare
    for s in "${names[@]}"; do is_ensemble "$s" || train "$s"; done
    for s in "${names[@]}"; do evaluate "$s"; done
    table ;;
  table) table ;;
  publish) publish ;;
  restore) restore "$@" ;;
  options) [[ $# -eq 1 ]] && ! is_ensemble "$1" || { usage; exit 2; }; system_flags "$1"; train_flags "$1"
    printf '%s\n' "${MODEL[@]}" "${TRAIN_NAME[@]}" $(time_limit) ;;
  *) usage; exit 2 ;;
esac
