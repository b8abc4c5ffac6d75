#!/usr/bin/env bash
# The papers' claims in form, at small scale: Luong et al. (2015) Tables 1, 4 and 6,
# Bahdanau et al. (2014) Figure 2 and perSPE's gain, with seeds and significance.
#
#   bash examples/luong2015_in_form/run.sh [OPTIONS] --plan          what the study trains, and its time
#   bash examples/luong2015_in_form/run.sh [OPTIONS] study           the whole study, --jobs trainings at a
#                                                                    time, each evaluated and published to
#                                                                    --results (committed) as it ends, then
#                                                                    the ensembles and the report
#   bash examples/luong2015_in_form/run.sh [OPTIONS] one SYSTEM SEED one training, evaluated and published
#   bash examples/luong2015_in_form/run.sh [OPTIONS] finish          the ensembles, the diagonal, the report
#   bash examples/luong2015_in_form/run.sh [OPTIONS] prepare         tokenise, dictionaries, binarize
#   bash examples/luong2015_in_form/run.sh [OPTIONS] train SYSTEM [SEED]
#                                                                    one training (default: every seed)
#   bash examples/luong2015_in_form/run.sh [OPTIONS] train-all       every training, seed 1 of each first
#   bash examples/luong2015_in_form/run.sh [OPTIONS] eval            translate, score, align what is trained
#   bash examples/luong2015_in_form/run.sh [OPTIONS] report          WORK/report.md and WORK/figures/
#   bash examples/luong2015_in_form/run.sh [OPTIONS] all             all of it, in that order
#   bash examples/luong2015_in_form/run.sh [OPTIONS] time SYSTEM [-- OPTIONS]
#                                                                    minutes per epoch of SYSTEM here
#                                                                    (e.g. -- --bf16)
#   bash examples/luong2015_in_form/run.sh systems                   the systems and their seeds
#
# SYSTEM is a name of `systems` (m30k_*, kftt_*), or perspe_spe_spe / perspe_spe_perspe
# (trained by examples/perspe/run.sh with PRESET=small).
#
# Options:
#   --shared DIR     the data folder (default: ../shared/data beside the checkout):
#                    multi30k_en_de, kftt_30k_ja_en, kftt_gold_align_ja_en
#   --work-dir DIR   everything goes here (default: runs/luong2015_in_form in the checkout)
#   --beam N         beam size of every translation (default: 5)
#   --slice N        use the first N training pairs of each corpus (tests; default: all)
#   --epochs N       at most N epochs of every system (default: systems.py MAX_EPOCHS; the
#                    schedule stops each training when it has converged; tests: fewer)
#   --size H         units of every layer of every system (default 0: the study's own, systems.py
#                    SIZES: one per corpus; tests: fewer)
#   --jobs N         trainings at a time in `study`, one thread each (default: 2)
#   --results DIR    where `study`, `one` and `finish` publish the small result files and the
#                    report (default: results/ beside this script, committed after each
#                    training: the checkout must then be a clean commit; elsewhere: no commit)
#   -- ARGS          after `train SYSTEM`: extra fairseq-train options (they override the
#                    system's; the key of the training records them)
#
# Every step is resumable: a finished step is skipped, an interrupted training resumes from
# its checkpoint_last.pt, a training or preparation made with other options is refused. A
# training runs in one process at a time: `one` refuses a training another `one` is under
# way with, and `study` leaves it to that process.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
RECIPE=in_form
STUDY="$HERE/study.py" TOOLS_DATA="$HERE/data_tools.py"

SHARED="$REPO/../shared/data" WORK="$REPO/runs/luong2015_in_form" BEAM=5 SLICE=0 EPOCHS="" SIZE=0
JOBS=2 RESULTS="$HERE/results"
usage() { sed -n "2,$(( $(grep -n '^set -euo' "$0" | cut -d: -f1) - 1 ))p" "$0" | sed 's/^# \{0,1\}//'; }
source "$REPO/examples/common/recipe.sh"
declare -A OPTS=([--shared]=SHARED [--work-dir]=WORK [--beam]=BEAM [--slice]=SLICE [--epochs]=EPOCHS [--size]=SIZE
                 [--jobs]=JOBS [--results]=RESULTS)
PLAN=0; ARGS=()
for a in "$@"; do [[ "$a" == --plan ]] && PLAN=1 || ARGS+=("$a"); done
parse_options "${ARGS[@]+"${ARGS[@]}"}"
set -- "${POS[@]+"${POS[@]}"}"
[[ "$BEAM" =~ ^[1-9][0-9]*$ ]] || die "--beam $BEAM: give a positive whole number"
[[ "$SLICE" =~ ^[0-9]+$ ]] || die "--slice $SLICE: give a whole number (0: all pairs)"
[[ -z "$EPOCHS" || "$EPOCHS" =~ ^[1-9][0-9]*$ ]] || die "--epochs $EPOCHS: give a positive whole number"
[[ "$SIZE" =~ ^[0-9]+$ && $(( SIZE % 2 )) == 0 ]] || die "--size $SIZE: give an even number (0: the study's own sizes)"
[[ "$JOBS" =~ ^[1-9][0-9]*$ ]] || die "--jobs $JOBS: give a positive whole number"
# one thread per training, in every step: the study's trainings run so (runner.py), and the
# thread count changes the numbers (a 2 x 128 Multi30k training: weights 9e-7 apart after 10
# updates at 1 and 2 threads), so `one` remakes a published training only with one thread
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
if (( PLAN )); then command -v python >/dev/null && python "$STUDY" plan --results "$RESULTS" --jobs "$JOBS"; exit 0; fi
recipe_init
# the study's own epoch cap (systems.py MAX_EPOCHS) unless given
[[ -n "$EPOCHS" ]] || EPOCHS="$(python "$STUDY" default max-epochs)"
# the options that make the study what it is (the key of every published result)
STUDY_OPTS=(--shared "$SHARED" --work-dir "$WORK" --beam "$BEAM" --slice "$SLICE" --epochs "$EPOCHS" --size "$SIZE")
M30K="$WORK/data/m30k" KFTT="$WORK/data/kftt"
M30K_SRC_WORDS=4000 M30K_TGT_WORDS=5000 KFTT_PIECES=8000 KFTT_VALID=150

# slice_copy SPLIT SRC DST: with --slice N, the first N lines of a training file and the first
# N / 10 (at least 20) of a held-out one; without it, all of SRC
slice_copy() {
  local n="$SLICE"; [[ "$1" != train ]] && n=$(( SLICE / 10 > 20 ? SLICE / 10 : 20 ))
  if (( SLICE > 0 )); then head -n "$n" "$2" > "$3.part"; mv "$3.part" "$3"; elif [[ "$2" != "$3" ]]; then cp "$2" "$3"; fi
}

# --------------------------------------------------------------------------
# Multi30k En->De, words (Luong et al.'s Tables 1 and 4)
prepare_m30k() {
  local d="$SHARED/multi30k_en_de" split lang
  for split in train valid test; do for lang in en de; do
    need_file "$d/$split.$lang" "--shared must hold multi30k_en_de/{train,valid,test}.{en,de} (Multi30k task 1, raw)"
  done; done
  local key; key="m30k words $M30K_SRC_WORDS/$M30K_TGT_WORDS slice $SLICE code $(sha1sum "$TOOLS_DATA" | cut -c1-12) \
data: $(data_key "$d"/{train,valid,test}.{en,de})"
  same_or_refuse "$M30K/prepared.options" "$key" "$M30K (prepared Multi30k)"
  fresh "$M30K/bin/.done" "$key" && return
  say "Multi30k: Moses tokenisation (case kept), vocabularies of the $M30K_SRC_WORDS English and \
$M30K_TGT_WORDS German words (the rest: <unk>)"
  mkdir -p "$M30K/raw" "$M30K/tok"
  python "$REPO/scripts/data/check_parallel.py" --trainpref "$d/train" --validpref "$d/valid" --testpref "$d/test" \
    -s en -t de >&2
  for split in train valid test; do for lang in en de; do
    slice_copy "$split" "$d/$split.$lang" "$M30K/raw/$split.$lang"
    python "$TOOLS_DATA" tokenize "$lang" < "$M30K/raw/$split.$lang" > "$M30K/tok/$split.$lang"
  done; done
  say "Multi30k: IBM Model 1 dictionary for unk replacement (5 EM iterations on the training data)"
  python "$TOOLS_DATA" ibm1 "$M30K/tok/train.en" "$M30K/tok/train.de" "$M30K/dict.en-de"
  rm -rf "$M30K/bin" "$M30K/raw-test"
  fairseq-preprocess -s en -t de --trainpref "$M30K/tok/train" --validpref "$M30K/tok/valid" \
    --testpref "$M30K/tok/test" --nwordssrc "$M30K_SRC_WORDS" --nwordstgt "$M30K_TGT_WORDS" \
    --destdir "$M30K/bin" --workers "$(nproc)" > "$M30K/preprocess.log" 2>&1 \
    || { tail -20 "$M30K/preprocess.log" >&2; die "fairseq-preprocess failed ($M30K/preprocess.log)"; }
  # --replace-unk reads each <unk>'s source word from the source text: a raw test set
  fairseq-preprocess -s en -t de --testpref "$M30K/tok/test" --srcdict "$M30K/bin/dict.en.txt" \
    --tgtdict "$M30K/bin/dict.de.txt" --destdir "$M30K/raw-test" --dataset-impl raw \
    > "$M30K/preprocess_raw.log" 2>&1 \
    || { tail -20 "$M30K/preprocess_raw.log" >&2; die "fairseq-preprocess --dataset-impl raw failed"; }
  touch "$M30K/raw-test/.done"  # what the translations' keys name (translate_key: ident DATA_BIN/.done)
  touch "$M30K/bin/.done"; stamp "$M30K/bin/.done" "$key"
}

# --------------------------------------------------------------------------
# KFTT Ja->En (Table 6, Bahdanau et al.'s Figure 2), without the
# gold-aligned sentences
prepare_kftt() {
  local d="$SHARED/kftt_30k_ja_en" g="$SHARED/kftt_gold_align_ja_en" split lang
  for f in "$d"/{train,tune}.{ja,en} "$g"/jaen.{ja,en,gold}; do
    need_file "$f" "--shared must hold kftt_30k_ja_en/{train,tune}.{ja,en} and kftt_gold_align_ja_en/jaen.{ja,en,gold}"
  done
  local key; key="kftt pieces $KFTT_PIECES valid $KFTT_VALID slice $SLICE code $(sha1sum "$TOOLS_DATA" | cut -c1-12) \
data: $(data_key "$d"/{train,tune}.{ja,en} "$g"/jaen.{ja,en})"
  same_or_refuse "$KFTT/prepared.options" "$key" "$KFTT (prepared KFTT)"
  fresh "$KFTT/bin/.done" "$key" && return
  mkdir -p "$KFTT/split" "$KFTT/text" "$KFTT/spm"
  python "$TOOLS_DATA" kftt-split "$KFTT/split" --kftt "$d" --gold "$g" --valid "$KFTT_VALID"
  for split in train valid test; do for lang in ja en; do
    slice_copy "$split" "$KFTT/split/$split.$lang" "$KFTT/split/$split.$lang"
  done; done
  python "$REPO/scripts/data/check_parallel.py" --trainpref "$KFTT/split/train" --validpref "$KFTT/split/valid" \
    --testpref "$KFTT/split/test" -s ja -t en >&2
  # Ja->En: English lower-cased, as the gold set's (force_align.py reads its sentences)
  for split in train valid test; do
    cp "$KFTT/split/$split.ja" "$KFTT/text/$split.ja"
    python -c "import sys; [sys.stdout.write(l.lower()) for l in open(sys.argv[1], encoding='utf-8', newline='\n')]" \
      "$KFTT/split/$split.en" > "$KFTT/text/$split.en"
  done
  say "KFTT: one SentencePiece model per language, $KFTT_PIECES pieces (Japanese over its MeCab words)"
  for lang in ja en; do
    python "$REPO/examples/common/spm_tool.py" train --input "$KFTT/text/train.$lang" \
      --model-prefix "$KFTT/spm/$lang" --vocab-size "$KFTT_PIECES" --character-coverage 0.9995
    for split in train valid test; do
      python "$REPO/examples/common/spm_tool.py" encode --model "$KFTT/spm/$lang.model" \
        < "$KFTT/text/$split.$lang" > "$KFTT/spm/$split.$lang"
    done
  done
  rm -rf "$KFTT/bin"
  fairseq-preprocess -s ja -t en --trainpref "$KFTT/spm/train" --validpref "$KFTT/spm/valid" \
    --testpref "$KFTT/spm/test" --destdir "$KFTT/bin" --workers "$(nproc)" > "$KFTT/preprocess.log" 2>&1 \
    || { tail -20 "$KFTT/preprocess.log" >&2; die "fairseq-preprocess failed ($KFTT/preprocess.log)"; }
  touch "$KFTT/bin/.done"; stamp "$KFTT/bin/.done" "$key"
}

prepare() { prepare_m30k; prepare_kftt; perspe prepare; }

corpus_bin() {  # corpus_bin CORPUS: its data-bin, after checking it is prepared
  local dir; case "$1" in m30k) dir="$M30K" ;; kftt) dir="$KFTT" ;; *) die "unknown corpus $1" ;; esac
  fresh "$dir/bin/.done" "$(cat "$dir/prepared.options" 2>/dev/null)" || die "run prepare first ($dir)"
  echo "$dir/bin"
}

# --------------------------------------------------------------------------
# Training
perspe() {  # examples/perspe/run.sh on small_parallel_enja En->Ja, PRESET=small (its own preset and scoring)
  local d="$SHARED/small_parallel_enja" split lang
  for split in train dev test; do for lang in en ja; do
    need_file "$d/$split.$lang" "--shared must hold small_parallel_enja/{train,dev,test}.{en,ja}"
  done; done
  if (( SLICE > 0 )); then  # --slice N: the first N training pairs (and N / 10 of dev and test)
    mkdir -p "$WORK/data/small_parallel_enja"
    for split in train dev test; do for lang in en ja; do
      slice_copy "$split" "$d/$split.$lang" "$WORK/data/small_parallel_enja/$split.$lang"
    done; done
    d="$WORK/data/small_parallel_enja"
  fi
  MAX_UPDATE="${MAX_UPDATE:-$(python "$STUDY" default perspe-max-update)}" \
  DATA="$d" WORK="$WORK/perspe" PRESET=small TABLE=1 JA_SEGMENTED=1 SEEDS="${PERSPE_SEEDS:-1 2 3}" \
    bash "$REPO/examples/perspe/run.sh" "$@"
}

perspe_options() { python "$STUDY" perspe-options "$1"; }  # the options of perspe_NAME (study.py)

train_one() {  # train_one SYSTEM SEED [extra fairseq-train options]
  local name="$1" seed="$2"; shift 2
  if [[ "$name" == perspe_* ]]; then
    local opts; opts="$(perspe_options "${name#perspe_}")" || exit 1
    mapfile -t opts <<< "$opts"
    mkdir -p "$WORK/perspe/systems/${name#perspe_}/seed$seed"
    git -C "$REPO" rev-parse HEAD > "$WORK/perspe/systems/${name#perspe_}/seed$seed/commit" 2>/dev/null || true
    PERSPE_SEEDS="$seed" perspe train "${name#perspe_}" -- "${opts[@]}" "$@"
    return
  fi
  local corpus args bin
  corpus="$(python "$STUDY" systems | awk -v n="$name" '$1 == n {print $3; exit}')"
  [[ -n "$corpus" ]] || die "unknown system '$name' (bash $0 systems)"
  python "$STUDY" systems | awk -v n="$name" -v s="$seed" '$1 == n && $2 == s {f = 1} END {exit !f}' \
    || die "$name has no seed $seed in the study (bash $0 systems)"
  bin="$(corpus_bin "$corpus")"
  mapfile -t args < <(python "$STUDY" args "$name" --epochs "$EPOCHS" --size "$SIZE")
  mkdir -p "$WORK/systems/$name.s$seed"
  git -C "$REPO" rev-parse HEAD > "$WORK/systems/$name.s$seed/commit" 2>/dev/null || true
  train_system "$name.s$seed" "$bin" "$(cat "$bin/.done.key")" "${args[@]}" --seed "$seed" "$@"
}

train() {  # train SYSTEM [SEED]
  local name="$1" seed="${2:-}"
  if [[ -n "$seed" ]]; then train_one "$name" "$seed" "${EXTRA[@]+"${EXTRA[@]}"}"; return; fi
  if [[ "$name" == perspe_* ]]; then
    for seed in ${PERSPE_SEEDS:-1 2 3}; do train_one "$name" "$seed" "${EXTRA[@]+"${EXTRA[@]}"}"; done; return
  fi
  local s
  for s in $(python "$STUDY" systems | awk -v n="$name" '$1 == n {print $2}'); do
    train_one "$name" "$s" "${EXTRA[@]+"${EXTRA[@]}"}"
  done
  [[ -n "${s:-}" ]] || die "unknown system '$name' (bash $0 systems)"
}

# train_all: seed 1 of every system, perSPE seed 1, then seed 2 of everything, then seed 3:
# a study stopped early has one of each
train_all() {
  local name seed corpus
  for seed in 1 2 3; do
    while read -r name s corpus; do
      [[ "$s" == "$seed" ]] && train_one "$name" "$seed"
    done < <(python "$STUDY" systems)
    for name in spe_spe spe_perspe; do train_one "perspe_$name" "$seed"; done
  done
}

# time SYSTEM [-- OPTIONS]: 200 updates of SYSTEM's seed 1 alone (no validation, no checkpoint;
# OPTIONS added, e.g. --bf16), then minutes per epoch = seconds per update x updates per epoch.
# A perSPE system trains 200 updates in WORK/perspe/systems/timing_NAME (deleted after).
time_system() {
  local name="$1" corpus bin args log; shift
  if [[ "$name" == perspe_* ]]; then
    local opts; opts="$(perspe_options "${name#perspe_}")" || exit 1
    mapfile -t opts <<< "$opts"
    rm -rf "$WORK/perspe/systems/timing_${name#perspe_}"
    PERSPE_SEEDS=1 MAX_UPDATE=201 perspe train "timing_${name#perspe_}" -- "${opts[@]}" --log-interval 10 "$@" >&2
    log="$WORK/perspe/systems/timing_${name#perspe_}/seed1/train.log"
  else
    corpus="$(python "$STUDY" systems | awk -v n="$name" '$1 == n {print $3; exit}')"
    [[ -n "$corpus" ]] || die "unknown system '$name'"
    bin="$(corpus_bin "$corpus")"
    mapfile -t args < <(python "$STUDY" args "$name" --epochs "$EPOCHS" --size "$SIZE")
    local dir="$WORK/timing/$name"; rm -rf "$dir"; mkdir -p "$dir"; log="$dir/train.log"
    fairseq-train "$bin" --user-dir "$REPO/fairseq_luong" "${args[@]}" --seed 1 --max-update 201 \
      --log-interval 1 --log-format simple --no-progress-bar --disable-validation --no-save \
      --save-dir "$dir" "$@" > "$log" 2>&1 || { tail -20 "$log" >&2; die "fairseq-train failed"; }
  fi
  python - "$log" "$name" "$([[ "$name" == perspe_* ]] && echo "the perSPE preset" || { (( SIZE )) && echo "size $SIZE" || echo "the study's size"; })${*:+, $*}" <<'PY'
import re, sys
walls, steps = [], None
for line in open(sys.argv[1], encoding="utf-8"):
    m = re.search(r"epoch \d+:\s+(\d+) / (\d+) .*wall=([\d.]+)", line)
    if m:
        walls.append((int(m.group(1)), float(m.group(3)))); steps = int(m.group(2))
(u0, w0), (u1, w1) = walls[0], walls[-1]
per_update = (w1 - w0) / (u1 - u0)
print(f"{sys.argv[2]} ({sys.argv[3]}): {per_update:.3f} s per update, {steps} updates "
      f"per epoch: {per_update * steps / 60:.2f} minutes per epoch (no validation)")
PY
  [[ "$name" == perspe_* ]] && rm -rf "$WORK/perspe/systems/timing_${name#perspe_}"
  return 0
}

# --------------------------------------------------------------------------
# Evaluation: every trained (system, seed) -> WORK/systems/NAME.sSEED/
#   model.pt           the state of the best validation loss (checkpoint_best.pt: the schedule
#                      stops after epochs that did not improve it)
#   test_ppl.json      perplexity on the test set (the paper's Tables 1 and 4: newstest2014)
#   test.detok         the translation of the test set, detokenised (KFTT: SentencePiece undone)
#   test.bleu.json     sacreBLEU against the raw reference
#   test.unk.*         the same with unk replacement (Multi30k attention models)
# and WORK/eval/: the ensemble, the forced alignments and AER (KFTT gold), heat maps

trained_list() {  # "NAME SEED CORPUS" of every finished training
  local name seed corpus
  while read -r name seed corpus; do
    [[ -f "$WORK/systems/$name.s$seed/trained" ]] && echo "$name $seed $corpus"
  done < <(python "$STUDY" systems)
  return 0
}

has_attention() { python "$STUDY" attention "$1"; }

test_ppl() {  # test_ppl LABEL BIN: WORK/systems/LABEL/test_ppl.json
  local label="$1" bin="$2" dir="$WORK/systems/$1"
  local key; key="$(cat "$dir/model.pt.key") test ppl"
  fresh "$dir/test_ppl.json" "$key" && return
  fairseq-validate "$bin" --user-dir "$REPO/fairseq_luong" --task translation --path "$dir/model.pt" \
    --valid-subset test --batch-size 64 --log-format simple > "$dir/test_ppl.log" 2>&1 \
    || { tail -20 "$dir/test_ppl.log" >&2; die "fairseq-validate failed for $label ($dir/test_ppl.log)"; }
  python "$TOOLS" valid-json "$dir/test_ppl.log" > "$dir/test_ppl.json"
  stamp "$dir/test_ppl.json" "$key"
}

# finish OUT LANG REF: OUT.hyp (tokenised) -> OUT.detok -> OUT.bleu.json against REF
finish() {
  local out="$1" lang="$2" ref="$3"
  local key; key="$(data_key "$out.hyp")"
  if ! fresh "$out.detok" "$key"; then
    if [[ "$lang" == de ]]; then python "$TOOLS" detok de < "$out.hyp" > "$out.detok"; else cp "$out.hyp" "$out.detok"; fi
    stamp "$out.detok" "$key"
  fi
  echo -n "$(basename "$(dirname "$out")") $(basename "$out"): " >&2
  score "$out.detok" "$ref" "$out.bleu.json" >&2
}

GEN=(--beam "$BEAM" --batch-size 64 --max-len-a 1.5 --max-len-b 10)

evaluate_system() {  # NAME SEED CORPUS
  local name="$1" seed="$2" corpus="$3" label="$1.s$2" bin
  local dir="$WORK/systems/$label"
  bin="$(corpus_bin "$corpus")"
  best_model "$label"
  test_ppl "$label" "$bin"
  if [[ "$corpus" == m30k ]]; then
    translate "$label" "$bin" "$dir/model.pt" "$M30K/tok/test.de" "$dir/test" --gen-subset test "${GEN[@]}"
    finish "$dir/test" de "$M30K/raw/test.de"
    if has_attention "$name"; then
      translate "$label +unk" "$M30K/raw-test" "$dir/model.pt" "$M30K/tok/test.de" "$dir/test.unk" \
        --gen-subset test --dataset-impl raw "${GEN[@]}" --replace-unk "$M30K/dict.en-de"
      finish "$dir/test.unk" de "$M30K/raw/test.de"
    fi
  else
    translate "$label" "$bin" "$dir/model.pt" "$KFTT/text/test.en" "$dir/test" --gen-subset test "${GEN[@]}" \
      --post-process sentencepiece
    finish "$dir/test" en "$KFTT/text/test.en"
  fi
}

# best_model LABEL: WORK/systems/LABEL/model.pt, a copy of its checkpoint_best.pt
best_model() {
  local dir="$WORK/systems/$1" key
  [[ -f "$dir/trained.key" ]] || die "$1: not trained (no $dir/trained): train it first"
  key="$(ident "$dir/trained") best"
  fresh "$dir/model.pt" "$key" && return
  [[ -f "$dir/checkpoints/checkpoint_best.pt" ]] || die "$1: no checkpoint_best.pt in $dir/checkpoints"
  cp "$dir/checkpoints/checkpoint_best.pt" "$dir/model.pt"
  stamp "$dir/model.pt" "$key"
}

model_paths() {  # model_paths NAME.sSEED...: their model.pt joined by ':' (an ensemble)
  local paths=() m
  for m in "$@"; do
    [[ -f "$WORK/systems/$m/model.pt" ]] || return 1
    paths+=("$WORK/systems/$m/model.pt")
  done
  (IFS=:; echo "${paths[*]}")
}

evaluate_ensemble() {  # Table 1's last row: the ensemble of systems.py's ENSEMBLE, + unk replace
  local members path dir="$WORK/eval/ensemble"
  members=($(python "$STUDY" ensemble))
  path="$(model_paths "${members[@]}")" || { say "ensemble: not all of ${members[*]} are trained and evaluated yet"; return 0; }
  mkdir -p "$dir"
  translate "ensemble of ${#members[@]}" "$M30K/raw-test" "$path" "$M30K/tok/test.de" "$dir/test.unk" \
    --gen-subset test --dataset-impl raw "${GEN[@]}" --replace-unk "$M30K/dict.en-de"
  finish "$dir/test.unk" de "$M30K/raw/test.de"
}

# evaluate_alignment NAME PATH: WORK/eval/aer/NAME.{paper,fairseq}.{align,aer}: forced alignment of
# the KFTT gold pairs (the gold's own words; pieces folded into words), one link per English word,
# read as footnote 14 (paper) and as fairseq's --print-alignment (fairseq), AER against the gold
evaluate_alignment() {
  local name="$1" path="$2" dir="$WORK/eval/aer" g="$SHARED/kftt_gold_align_ja_en" conv key m
  mkdir -p "$dir"
  key=""; for m in ${path//:/ }; do key+="$(cat "$m.key") "; done; key+="gold: $(data_key "$g"/jaen.{ja,en,gold})"
  for conv in paper fairseq; do
    local flag=(); [[ "$conv" == paper ]] && flag=(--paper-convention)
    if ! fresh "$dir/$name.$conv.aer" "$key"; then
      python "$REPO/scripts/eval/force_align.py" "$KFTT/bin" --path "$path" -s ja -t en --source "$g/jaen.ja" \
        --target "$g/jaen.en" --spm-model "$KFTT/spm/ja.model" --spm-model-target "$KFTT/spm/en.model" \
        "${flag[@]+"${flag[@]}"}" --output "$dir/$name.$conv.align" 2> "$dir/$name.$conv.align.log" \
        || { tail -5 "$dir/$name.$conv.align.log" >&2; die "force_align.py failed for $name"; }
      aer_of "$dir/$name.$conv"
      stamp "$dir/$name.$conv.aer" "$key"
    fi
    say "AER $name ($conv): $(head -1 "$dir/$name.$conv.aer")"
  done
}

aer_of() {  # aer_of PREFIX: PREFIX.aer from PREFIX.align against the KFTT gold (ja-en, 1-based)
  local g="$SHARED/kftt_gold_align_ja_en"
  python "$REPO/scripts/eval/aer.py" "$g/jaen.gold" "$1.align" --first-text "$g/jaen.ja" --second-text "$g/jaen.en" \
    --drop-out-of-range-gold > "$1.aer.part" 2> "$1.aer.log" \
    || { tail -5 "$1.aer.log" >&2; die "aer.py failed on $1.align ($1.aer.log)"; }
  mv "$1.aer.part" "$1.aer"
}

evaluate_diagonal() {
  local dir="$WORK/eval/aer" g="$SHARED/kftt_gold_align_ja_en"
  mkdir -p "$dir"
  python "$REPO/scripts/eval/diagonal_align.py" --source "$g/jaen.ja" --target "$g/jaen.en" > "$dir/diagonal.align"
  aer_of "$dir/diagonal"
  say "AER diagonal: $(head -1 "$dir/diagonal.aer")"
}

# heatmap NAME.sSEED CORPUS LINE: the attention of the model translating test line LINE
heatmap() {
  local label="$1" corpus="$2" line="$3" dir="$WORK/eval/heatmaps" src spm=()
  mkdir -p "$dir/$label"
  local png="$dir/$label/attention_$line.png" key; key="$(cat "$WORK/systems/$label/model.pt.key") line $line beam $BEAM"
  fresh "$png" "$key" && return
  if [[ "$corpus" == kftt ]]; then src="$KFTT/text/test.ja" spm=(--spm-model "$KFTT/spm/ja.model")
  else src="$M30K/tok/test.en"; fi
  python "$REPO/scripts/eval/plot_attention.py" "$(corpus_bin "$corpus")" --path "$WORK/systems/$label/model.pt" \
    --source "$src" --lines "$line" --beam "$BEAM" "${spm[@]+"${spm[@]}"}" --out-dir "$dir/$label" \
    > "$dir/$label/attention.log" 2>&1 || { tail -20 "$dir/$label/attention.log" >&2; die "plot_attention.py failed for $label"; }
  stamp "$png" "$key"
}

evaluate() {
  local name seed corpus
  while read -r name seed corpus; do evaluate_system "$name" "$seed" "$corpus"; done < <(trained_list)
  [[ -f "$M30K/bin/.done" ]] && evaluate_ensemble
  if [[ -f "$KFTT/bin/.done" ]]; then
    evaluate_diagonal
    local aer=() path line
    for name in $(python "$STUDY" aer-systems); do
      path="$(model_paths "$name.s1")" || continue
      evaluate_alignment "$name" "$path"; aer+=("$name.s1")
    done
    if (( ${#aer[@]} > 1 )); then evaluate_alignment ensemble "$(model_paths "${aer[@]}")"; fi
    line="$(python "$STUDY" long-line "$KFTT/text/test.ja")"
    for name in $(python "$STUDY" heatmap-systems); do
      [[ -f "$WORK/systems/$name.s1/model.pt" ]] && heatmap "$name.s1" kftt "$line"
    done
  fi
  if [[ -d "$WORK/perspe/systems" ]]; then
    for name in $(python "$STUDY" perspe-systems); do
      for seed in 1 2 3; do
        [[ -f "$WORK/perspe/systems/$name/seed$seed/trained" ]] && evaluate_perspe "$name" "$seed"
      done
    done
  fi
  return 0
}

# evaluate_perspe NAME SEED: the perSPE seed's last checkpoint translates small_parallel_enja's
# test (beam BEAM, plain positions: the preset's decoding), scored by examples/perspe/score.py
# on normalised text (ja-mecab), as the perSPE recipe scores:
# WORK/perspe/systems/NAME/seedSEED/study_test.{out,hyp}, study_bleu.json
evaluate_perspe() {
  local name="$1" seed="$2" dir="$WORK/perspe/systems/$1/seed$2"
  local ckpt="$dir/checkpoints/checkpoint_last.pt"
  local key; key="$(data_key "$ckpt") beam $BEAM"
  fresh "$dir/study_bleu.json" "$key" && return
  say "perSPE $name seed $seed: translating test (beam $BEAM)"
  fairseq-generate "$WORK/perspe/data-bin" --user-dir "$REPO/fairseq_luong" --task translation_chunks -s en -t ja \
    --gen-subset test --path "$ckpt" --beam "$BEAM" --batch-size 128 --post-process sentencepiece \
    > "$dir/study_test.out" 2> "$dir/study_test.log" \
    || { tail -20 "$dir/study_test.log" >&2; die "fairseq-generate failed for perSPE $name seed $seed"; }
  python "$TOOLS" hyps "$dir/study_test.out" --ref "$WORK/perspe/raw/test.ja" > "$dir/study_test.hyp"
  python "$REPO/examples/perspe/score.py" score --hyp "$dir/study_test.hyp" --ref "$WORK/perspe/raw/test.ja" \
    --json "$dir/study_bleu.json"
  stamp "$dir/study_bleu.json" "$key"
}

# --------------------------------------------------------------------------
# The study as it runs: each training evaluated as soon as it ends and its small files
# published to RESULTS (study.py publish: keyed on the commit and the options, committed
# when RESULTS is the recipe's own folder), so that a stopped study loses at most the
# trainings under way; checkpoints stay in WORK.

# eval_one SYSTEM SEED: what the study reads of one training: translations and scores, and
# for seed 1 of the KFTT attention systems the forced alignments (Table 6) and the heat map
eval_one() {
  local name="$1" seed="$2" corpus
  if [[ "$name" == perspe_* ]]; then evaluate_perspe "${name#perspe_}" "$seed"; return; fi
  corpus="$(python "$STUDY" systems | awk -v n="$name" '$1 == n {print $3; exit}')"
  evaluate_system "$name" "$seed" "$corpus"
  [[ "$corpus" == kftt && "$seed" == 1 ]] || return 0
  if [[ " $(python "$STUDY" aer-systems) " == *" $name "* ]]; then
    evaluate_alignment "$name" "$(model_paths "$name.s1")"
  fi
  if [[ " $(python "$STUDY" heatmap-systems) " == *" $name "* ]]; then
    heatmap "$name.s1" kftt "$(python "$STUDY" long-line "$KFTT/text/test.ja")"
  fi
}

publish() { python "$STUDY" publish "$@" --work "$WORK" --results "$RESULTS" -- "${STUDY_OPTS[@]}"; }
prepare_once() { mkdir -p "$WORK"; ( flock 9; prepare ) 9> "$WORK/.prepare.lock"; }

one() {  # one SYSTEM SEED: train, evaluate, publish (a published result is compared, not replaced)
  publish --check "$1" "$2"
  # one process per training: a second `one` of it, or `study` (runner.run_all skips it), would
  # train into the same folder; the lock is runner.lock_path's, held until this process ends
  local lock; lock="$(python "$STUDY" lock-path "$1" "$2" --work "$WORK")"
  mkdir -p "$(dirname "$lock")"
  exec 8>> "$lock"
  flock -n 8 || die "$1 seed $2 is being trained by another process ($(cat "$lock")): wait for it to end, or stop it"
  echo "pid $$, since $(date -u '+%Y-%m-%d %H:%M UTC')" > "$lock"
  prepare_once
  train_one "$1" "$2"
  eval_one "$1" "$2"
  publish "$1" "$2"
}

finish_study() {  # the rows that need several checkpoints, the diagonal baseline, the report
  prepare_once
  evaluate_diagonal
  evaluate_ensemble
  local aer=() name
  for name in $(python "$STUDY" aer-systems); do
    [[ -f "$WORK/systems/$name.s1/model.pt" ]] && aer+=("$name.s1")
  done
  if (( ${#aer[@]} == 3 )); then evaluate_alignment ensemble "$(model_paths "${aer[@]}")"; fi
  publish --finish
  report_all
}

study() {
  publish --check-all
  prepare_once
  python "$STUDY" run --jobs "$JOBS" --run-sh "$HERE/run.sh" --results "$RESULTS" -- "${STUDY_OPTS[@]}"
  finish_study
}

report_all() {
  python "$STUDY" report "$RESULTS" --shared "$SHARED"
  say "report: $RESULTS/report.md (figures: $RESULTS/figures/)"
}

cmd="${1:-}"; [[ $# -gt 0 ]] && shift
case "$cmd" in
  prepare) prepare ;;
  train) [[ $# -ge 1 && $# -le 2 ]] || { usage; exit 2; }; train "$@" ;;
  train-all) train_all ;;
  time) [[ $# -eq 1 ]] || { usage; exit 2; }; time_system "$1" "${EXTRA[@]+"${EXTRA[@]}"}" ;;
  systems) python "$STUDY" systems; echo "perspe_spe_spe 1 2 3 small_parallel_enja"; echo "perspe_spe_perspe 1 2 3 small_parallel_enja" ;;
  eval) evaluate ;;
  study) study ;;
  one) [[ $# -eq 2 ]] || { usage; exit 2; }; one "$@" ;;
  finish) finish_study ;;
  report) report_all ;;
  all) prepare; train_all; evaluate; report_all ;;
  *) usage; exit 2 ;;
esac
