#!/usr/bin/env bash
# WMT'14 English->German as Luong, Pham & Manning (2015), section 4: Tables 1, 2, 4 and 6.
#
#   bash examples/wmt14_en_de/run.sh [OPTIONS] plan [ROW...]      what the run will do: rows, models,
#                                                                 updates, checkpoints and disk, GPUs
#                                                                 and batch per GPU, time per epoch
#   bash examples/wmt14_en_de/run.sh [OPTIONS] prepare            get the data, filter, check, binarize
#   bash examples/wmt14_en_de/run.sh [OPTIONS] train ROW          train the model(s) of a row
#   bash examples/wmt14_en_de/run.sh [OPTIONS] translate ROW      translate the row's test set
#   bash examples/wmt14_en_de/run.sh [OPTIONS] eval ROW           perplexity on newstest2014, tokenized
#                                                                 BLEU (the paper's), sacreBLEU on
#                                                                 detokenized text (Table 2: the
#                                                                 paper's NIST BLEU), AER with --gold-align
#   bash examples/wmt14_en_de/run.sh [OPTIONS] all [ROW...]       plan, then all of it (default: every row)
#   bash examples/wmt14_en_de/run.sh [OPTIONS] table              fresh results beside the paper's
#                                                                 (WORK/results.md), BLEU by length
#                                                                 (WORK/bleu_by_length.{md,png})
#   bash examples/wmt14_en_de/run.sh [OPTIONS] time-epoch ROW     time a few updates of ROW's model
#                                                                 here, extrapolate to one epoch
#   bash examples/wmt14_en_de/run.sh rows                         list the rows and their models
#
# Options:
#   --data-dir DIR      the Stanford release's files (train.{en,de}, newstest2012..2015.{en,de},
#                       vocab.50K.{en,de}, and for unk replacement dict.en-de); nothing is
#                       downloaded then. Without it they are downloaded from
#                       nlp.stanford.edu/projects/nmt/ into WORK/raw.
#   --work-dir DIR      (default: runs/wmt14_en_de in the checkout)
#   --raw-ref FILE      the untokenized newstest2014 German reference, for sacreBLEU on detokenized
#                       output (default: DIR/newstest2014.raw.de if it exists, else sacreBLEU's
#                       wmt14 en-de, 2,737 lines: the paper's newstest2014)
#   --raw-ref-2015 FILE the same for newstest2015 (Table 2; default DIR/newstest2015.raw.de,
#                       else sacreBLEU's wmt15 en-de). A reference whose line count differs from
#                       the release's test source is refused, and never kept.
#   --gold-align F      gold word alignments for AER (Table 6): one line of links per sentence,
#                       sure i-j and possible ipj, 1-based (RWTH / TALP style; see README.md)
#   --gold-text P       the gold set's sentences, P.en and P.de, tokenized as the release
#   --gold-first L      the language of the links' first index: de (default: RWTH's
#                       German-English set puts German first) or en
#   --gpus N            GPUs each training uses (default 1): --distributed-world-size N and
#                       128 / N sentences per GPU, so every update is the paper's 128 sentences
#   --generate-args "A" extra fairseq-generate options for every translation (default none;
#                       e.g. "--beam 1" for a quick look; part of the translations' keys)
#   --reserve GB        disk to leave free: plan and all refuse to start when the plan needs more
#                       than the free disk minus GB (default 0)
#   --updates N         time-epoch: updates to time (default: 5, after one untimed)
#   -- ARGS             after `train ROW` or `all ROW...`: extra fairseq-train options for every
#                       model (they override the row's; recorded with the model)
#
# Steps are resumable and keyed (examples/common/recipe.sh, "Freshness"): a finished step
# is skipped, an interrupted training resumes from checkpoint_last.pt; data, translations
# and scores whose inputs, options or code changed are made again; a model trained with
# other options or other code is refused (RETRAIN=1 trains it again, ACCEPT_CODE=1 keeps
# it across a code change); `table` prints fresh results only and names what is missing.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
RECIPE=wmt14
URL=https://nlp.stanford.edu/projects/nmt/data/wmt14.en-de

DATA="" WORK="$REPO/runs/wmt14_en_de" RAW_REF="" RAW_REF15="" GOLD="" GOLD_TEXT="" GOLD_FIRST=de
UPDATES=5 BEAM=12 GPUS=1 GEN_ARGS="" RESERVE=0
usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; }  # the header comment
source "$REPO/examples/common/recipe.sh"
declare -A OPTS=([--data-dir]=DATA [--work-dir]=WORK [--raw-ref]=RAW_REF [--raw-ref-2015]=RAW_REF15
                 [--gold-align]=GOLD [--gold-text]=GOLD_TEXT [--gold-first]=GOLD_FIRST [--updates]=UPDATES
                 [--gpus]=GPUS [--generate-args]=GEN_ARGS [--reserve]=RESERVE)
parse_options "$@"
set -- "${POS[@]+"${POS[@]}"}"
check_number --updates "$UPDATES" count "the number of updates to time"
check_number --gpus "$GPUS" count "the number of GPUs each training uses"
check_number --reserve "$RESERVE" integer "the disk to leave free in GB"
[[ "$GOLD_FIRST" == de || "$GOLD_FIRST" == en ]] \
  || { echo "run.sh: --gold-first $GOLD_FIRST: give de or en (the language of the links' first index)" >&2; exit 2; }
(( 128 % GPUS == 0 && 80 % GPUS == 0 )) \
  || { echo "run.sh: --gpus $GPUS: the paper's batch of 128 sentences (RNNsearch: 80) must split evenly over the GPUs: give 1, 2, 4, 8 or 16" >&2; exit 2; }
read -r -a GEN_EXTRA <<< "$GEN_ARGS"
recipe_init
train_launcher "$GPUS"  # several GPUs: torchrun starts one fairseq-train process per GPU
FILES=(train.en train.de newstest2012.en newstest2012.de newstest2013.en newstest2013.de
       newstest2014.en newstest2014.de newstest2015.en newstest2015.de
       vocab.50K.en vocab.50K.de)
DICT=dict.en-de  # for unk replacement; without it the attended source word is copied
SRC_DIR="${DATA:-$WORK/raw}"
RAW="$WORK/data-raw"  # the test sets as text (--dataset-impl raw): --replace-unk reads the source words
declare -A SPLIT_FILE=([test]=newstest2014 [test1]=newstest2015)
declare -A SACREBLEU_SET=([test]=wmt14 [test1]=wmt15)

# --------------------------------------------------------------------------
# Models (section 4.1) and the rows of Tables 1, 2 and 4 that use them: written once, in
# fairseq_luong/paper_settings/luong2015.py (the in-form study and the *_wmt_en_de archs read it
# too): 4 layers x 1000 cells, 1000-dim embeddings, U[-0.1, 0.1], no output bias (eq. 6),
# plain SGD lr 1.0 on the gradient averaged over the batch's *sentences*, batches of 128,
# gradient norm rescaled to 5, 10 epochs halving the lr every epoch after the 5th (with
# dropout 0.2: 12 epochs, halving after the 8th), sentences <= 50 words.
PROTOCOL=(python -m fairseq_luong.paper_settings.luong2015)
MAX_WORDS="$(python -c 'from fairseq_luong.paper_settings.luong2015 import MAX_WORDS; print(MAX_WORDS)')"
# one process per GPU, the batch split over them; only checkpoint_last.pt and
# checkpoint_best.pt are kept (an epoch checkpoint of 4 x 1000 is ~0.45 GB in fp16)
RUN_FLAGS=(--skip-invalid-size-inputs-valid-test --log-interval 100 --distributed-world-size "$GPUS"
           --no-epoch-checkpoints)

# model_flags MODEL: MODEL_ARGS=(fairseq-train options of MODEL)
model_flags() {
  local m="$1" out
  if [[ "$m" == rnnsearch ]]; then
    # Bahdanau et al. 2014 (RNNsearch-50), section 4.2 and appendix B.2; the paper gives
    # training time (about 5 days), not epochs: 10 epochs here
    out="$(python -m fairseq_luong.paper_settings.bahdanau2014 --epochs 10 --gpus "$GPUS")" || die "bahdanau2014 protocol"
    mapfile -t MODEL_ARGS <<< "$out"
    MODEL_ARGS=(--arch rnnsearch_wmt "${MODEL_ARGS[@]}" "${RUN_FLAGS[@]}")
    return
  fi
  out="$("${PROTOCOL[@]}" model "$m" --gpus "$GPUS" 2>/dev/null)" || die "unknown model '$m'"
  mapfile -t MODEL_ARGS <<< "$out"
  MODEL_ARGS+=("${RUN_FLAGS[@]}")
}

ENSEMBLE="$("${PROTOCOL[@]}" ensemble)"
# the rows of the table, as data: examples/wmt14_en_de/rows.py (the protocol's rows of
# Tables 1, 2, 4 and 6, and RNNsearch beside them); fields by name
ROWS_PY=(python "$HERE/rows.py")
_rows="$("${ROWS_PY[@]}" all)" || die "rows.py failed"
eval "$_rows"  # ROW_NAMES, ROW_FIELDS[ROW/FIELD]: read once (run.sh asks for fields hundreds of times)
row_field() {  # row_field ROW FIELD
  [[ -n "${ROW_FIELDS[$1/$2]+set}" ]] || die "unknown row '$1' (bash $0 rows)"
  echo "${ROW_FIELDS[$1/$2]}"
}
row_models() { row_field "$1" models; }
# check_row ROW: stop unless ROW is a row of the table (called before any work: a `die`
# inside $(...) would only end that subshell)
check_row() {
  local r
  for r in "${ROW_NAMES[@]}"; do [[ "$r" == "$1" ]] && return 0; done
  die "unknown row '$1' (bash $0 rows)"
}
all_models() {  # the models of ROWs, each once
  local r; for r in "$@"; do row_models "$r" | tr ' ' '\n'; done | awk 'NF && !seen[$0]++'
}

# --------------------------------------------------------------------------
# prepare: WORK/text (the training pairs of at most 50 words, the dictionaries),
# WORK/data-bin (train, valid = newstest2013, test = newstest2014, test1 = newstest2015)
prepare_key() {
  printf 'max %s words data: %s\n%s' "$MAX_WORDS" "$(data_key "${FILES[@]/#/$SRC_DIR/}")" \
    "$(code_version prepare "$HERE/filter_pairs.py" "$TOOLS" "${FAIRSEQ_DISTS[@]}")"
}
prepare() {
  local f
  if [[ -n "$DATA" ]]; then
    [[ -s "$DATA/$DICT" ]] || say "no $DATA/$DICT: unk replacement will copy the attended source \
word instead of translating it (the release's dictionary: $URL/$DICT)"
    for f in "${FILES[@]}"; do
      need_file "$DATA/$f" "--data-dir must hold the Stanford release's files (${FILES[*]}): \
get them from $URL/ (Luong et al.'s preprocessed WMT'14 data)"
    done
  else
    mkdir -p "$WORK/raw"
    for f in "${FILES[@]}" "$DICT"; do
      [[ -s "$WORK/raw/$f" ]] && continue
      say "downloading $URL/$f"
      if ! curl -fL --retry 3 -o "$WORK/raw/$f.part" "$URL/$f"; then
        [[ "$f" == "$DICT" ]] && { say "could not download $URL/$f: unk replacement will copy source words"; continue; }
        die "could not download $URL/$f: download the release by hand and give --data-dir"
      fi
      mv "$WORK/raw/$f.part" "$WORK/raw/$f"
    done
  fi
  local key; key="$(prepare_key)"
  fresh "$BIN/.done" "$key" && return
  [[ -e "$BIN/.done" ]] && say "the release's files or the preparation code changed: preparing again"
  local t0=$SECONDS
  mkdir -p "$WORK/text"
  say "keeping training pairs of at most $MAX_WORDS words on both sides (section 4.1)"
  python "$HERE/filter_pairs.py" "$SRC_DIR/train.en" "$SRC_DIR/train.de" "$WORK/text/train" \
    --src-lang en --tgt-lang de --max-words "$MAX_WORDS"
  # what fairseq-preprocess will read: the kept training pairs and the test sets
  python "$REPO/scripts/data/check_parallel.py" --trainpref "$WORK/text/train" \
    --validpref "$SRC_DIR/newstest2013" --testpref "$SRC_DIR/newstest2014,$SRC_DIR/newstest2015" \
    "$SRC_DIR/newstest2012" -s en -t de --control-characters keep >&2
  for f in en de; do
    python "$TOOLS" vocab-to-dict "$SRC_DIR/vocab.50K.$f" "$WORK/text/dict.$f.txt"
  done
  say "fairseq-preprocess with the release's 50K vocabularies (log: $WORK/preprocess.log)"
  rm -rf "$BIN"
  fairseq-preprocess -s en -t de --trainpref "$WORK/text/train" \
    --validpref "$SRC_DIR/newstest2013" --testpref "$SRC_DIR/newstest2014,$SRC_DIR/newstest2015" \
    --srcdict "$WORK/text/dict.en.txt" --tgtdict "$WORK/text/dict.de.txt" \
    --destdir "$BIN" --workers "$(nproc)" > "$WORK/preprocess.log" 2>&1 \
    || { tail -20 "$WORK/preprocess.log" >&2; die "fairseq-preprocess failed"; }
  touch "$BIN/.done"; stamp "$BIN/.done" "$key"
  say "prepared in $((SECONDS - t0)) s: $BIN (test = newstest2014, test1 = newstest2015)"
}
# prepared_wmt: the prepared data, made again first when the release or the preparation
# code changed (the same files come out: models trained on them stay fresh)
prepared_wmt() { prepare; }

# fp16 when a GPU is there (the CPU has no fp16 training)
device_flags() {
  DEVICE=()
  command -v nvidia-smi > /dev/null || return 0  # no NVIDIA driver: no CUDA (and no torch import)
  python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" && DEVICE=(--fp16)
  return 0
}

# model_args MODEL: TRAIN_ARGS=(every fairseq-train option MODEL is trained with: its flags,
# the device's, and the extra options it was first trained with, WORK/systems/MODEL/extra)
model_args() {
  local extra=() f="$WORK/systems/$1/extra"
  model_flags "$1"
  [[ -f "$f" ]] && eval "extra=($(cat "$f"))"
  TRAIN_ARGS=("${MODEL_ARGS[@]}" "${DEVICE[@]+"${DEVICE[@]}"}" "${extra[@]+"${extra[@]}"}")
}
data_ident() { ident "$BIN/.done"; }

train_model() {
  local m="$1" dir="$WORK/systems/$1"; shift
  prepared_wmt; model_flags "$m"
  train_system "$m" "$BIN" "$(data_ident)" "${MODEL_ARGS[@]}" "${DEVICE[@]+"${DEVICE[@]}"}" "$@"
  key_of "$@" > "$dir/extra"  # eval and table read the model's options back from it
}

train_row() {
  local row="$1" m models; shift
  models="$(row_models "$row")"
  for m in $models; do train_model "$m" "$@"; done
}

# model_state MODEL: nothing when MODEL is trained, fresh, and its model.pt made; else why not
model_state() {
  local dir="$WORK/systems/$1"
  [[ -f "$dir/trained" ]] || { echo "$1 not trained"; return; }
  model_args "$1"
  local key; key="$(train_key "$(data_ident)" "${TRAIN_ARGS[@]}")"
  fresh "$dir/trained" "$key" || { echo "$1 stale: $(stale_reason "$dir/trained" "$key")"; return; }
  fresh "$dir/model.pt" "$(average_key "$1" 1)" || echo "$1 not translated yet"
}

# row_outputs ROW: OUTS=(the row's translations: WORK/rows/ROW/SPLIT and/or SPLIT.unk),
# with the generate options of each (GEN_OF[OUT]), the data (BIN_OF[OUT]), the models
# (PATHS), the split (SPLIT) and its tokenized reference (REF)
declare -A GEN_OF=() BIN_OF=()
row_outputs() {
  local row="$1" m unk dir="$WORK/rows/$1"
  PATHS="" OUTS=() SPLIT="$(row_field "$row" split)"
  for m in $(row_models "$row"); do PATHS+="${PATHS:+:}$WORK/systems/$m/model.pt"; done
  REF="$SRC_DIR/${SPLIT_FILE[$SPLIT]}.de"
  unk="$(row_field "$row" unk)"
  local gen=(--gen-subset "$SPLIT" --beam "$BEAM" --batch-size 32 --max-len-a 1.5 --max-len-b 10
             "${GEN_EXTRA[@]+"${GEN_EXTRA[@]}"}")
  if [[ "$unk" != yes ]]; then
    OUTS+=("$dir/$SPLIT"); GEN_OF["$dir/$SPLIT"]="$(key_of "${gen[@]}")"; BIN_OF["$dir/$SPLIT"]="$BIN"
  fi
  if [[ "$unk" != no ]]; then
    # --replace-unk takes each <unk>'s source word from the source text: a raw dataset
    local dict=("$SRC_DIR/$DICT"); [[ -s "$SRC_DIR/$DICT" ]] || dict=()
    OUTS+=("$dir/$SPLIT.unk")
    GEN_OF["$dir/$SPLIT.unk"]="$(key_of "${gen[@]}" --dataset-impl raw --replace-unk "${dict[@]+"${dict[@]}"}")"
    BIN_OF["$dir/$SPLIT.unk"]="$RAW"
  fi
}

# translate_row ROW: WORK/rows/ROW/{SPLIT,SPLIT.unk}.hyp (tokenized, as the paper scores)
translate_row() {
  local row="$1" m why out gen=()
  prepared_wmt
  for m in $(row_models "$row"); do
    why="$(model_state "$m")"
    [[ "$why" == *"not trained"* || "$why" == *stale* ]] && die "$why: train it (bash $0 train $row; RETRAIN=1 \
to train a stale model again, ACCEPT_CODE=1 to keep it across a code change)"
    average_last "$m" 1
  done
  row_outputs "$row"
  mkdir -p "$WORK/rows/$row"
  [[ -s "$SRC_DIR/$DICT" ]] || [[ "$(row_field "$row" unk)" == no ]] \
    || say "$row: no $SRC_DIR/$DICT: unk replacement copies the attended source word (the release's dictionary: $URL/$DICT)"
  for out in "${OUTS[@]}"; do
    [[ "${BIN_OF[$out]}" == "$RAW" ]] && raw_test
    eval "gen=(${GEN_OF[$out]})"
    translate "$row" "${BIN_OF[$out]}" "$PATHS" "$REF" "$out" "${gen[@]}"
  done
}

# raw_test: WORK/data-raw, newstest2014 (test) and newstest2015 (test1) as fairseq-preprocess
# --dataset-impl raw writes them (the text beside the dictionaries)
raw_test() {
  local key; key="$(printf 'from %s\n%s' "$(data_ident)" "$(code_version prepare-raw "${FAIRSEQ_DISTS[@]}")")"
  fresh "$RAW/.done" "$key" && return
  rm -rf "$RAW"
  fairseq-preprocess -s en -t de --testpref "$SRC_DIR/newstest2014,$SRC_DIR/newstest2015" \
    --srcdict "$WORK/text/dict.en.txt" --tgtdict "$WORK/text/dict.de.txt" --destdir "$RAW" \
    --dataset-impl raw > "$WORK/preprocess_raw.log" 2>&1 \
    || { tail -20 "$WORK/preprocess_raw.log" >&2; die "fairseq-preprocess --dataset-impl raw failed"; }
  touch "$RAW/.done"; stamp "$RAW/.done" "$key"
}

# lines FILE: its number of lines (a last line without "\n" counts)
lines() { awk 'END { print NR }' "$1"; }

# check_reference FILE SPLIT: stop unless FILE has as many lines as the split's source
check_reference() {
  local src="$SRC_DIR/${SPLIT_FILE[$2]}.en" n m
  n="$(lines "$1")" m="$(lines "$src")"
  (( n == m )) || die "$1 has $n lines but $src has $m: not the same test set (sacreBLEU's \
wmt14/full has 3,003 lines; the paper's newstest2014 is its wmt14, 2,737)"
}

# raw_reference SPLIT [fetch]: the untokenized reference of SPLIT, checked against the source's
# line count: --raw-ref(-2015), DIR/newstest201X.raw.de, or sacreBLEU's copy (fetched into
# WORK/raw only with "fetch" and without --data-dir, kept only when its count is right);
# nothing when there is none
raw_reference() {
  local split="$1" given="$RAW_REF" name="${SPLIT_FILE[$1]}"
  [[ "$split" == test1 ]] && given="$RAW_REF15"
  if [[ -n "$given" ]]; then
    need_file "$given" "the untokenized $name German reference"; check_reference "$given" "$split"
    echo "$given"; return
  fi
  if [[ -s "$SRC_DIR/$name.raw.de" ]]; then check_reference "$SRC_DIR/$name.raw.de" "$split"; echo "$SRC_DIR/$name.raw.de"; return; fi
  local set="${SACREBLEU_SET[$split]}" cached="$WORK/raw/$name.raw.de"
  local key; key="$(printf 'sacrebleu -t %s -l en-de --echo ref\n%s' "$set" "$(code_score)")"
  if ! fresh "$cached" "$key"; then
    [[ "${2:-}" == fetch && -z "$DATA" ]] || return 0  # with --data-dir nothing is downloaded
    mkdir -p "$WORK/raw"; rm -f "$cached" "$cached.key"
    sacrebleu -t "$set" -l en-de --echo ref > "$cached.part" 2> "$WORK/raw/sacrebleu_$set.log" \
      || { rm -f "$cached.part"; return 0; }
    local n m; n="$(lines "$cached.part")" m="$(lines "$SRC_DIR/$name.en")"
    (( n == m )) || { rm -f "$cached.part"; die "sacreBLEU's $set en-de reference ($cached, not kept) has $n lines \
but $SRC_DIR/$name.en has $m: not the same test set"; }
    mv "$cached.part" "$cached"; stamp "$cached" "$key"
  fi
  check_reference "$cached" "$split"
  echo "$cached"
}

# detok OUT: OUT.detok, the tokenized OUT.hyp Moses-detokenized
detok_key() { printf '%s\n%s' "$(ident "$1.hyp")" "$(code_version detok "$TOOLS" --dist sacremoses)"; }
detok() {
  local key; key="$(detok_key "$1")"
  fresh "$1.detok" "$key" && return
  python "$TOOLS" detok de < "$1.hyp" > "$1.detok.part"; mv "$1.detok.part" "$1.detok"; stamp "$1.detok" "$key"
}

VALIDATE=(--batch-size 64)
evaluate_row() {
  local row="$1" dir="$WORK/rows/$1" out ref m models
  prepared_wmt
  # the untokenized reference first: a wrong one stops the run before any translation
  ref="$(raw_reference "$(row_field "$row" split)" fetch)"
  translate_row "$row"
  models="$(row_models "$row")"
  if [[ -n "$(row_field "$row" paper_ppl)" && "$models" != *" "* ]]; then
    # Tables 1 and 4: perplexity on newstest2014 (the paper's); newstest2013's beside it
    validate_model "$models" "$BIN" --subset test "${VALIDATE[@]}"
    validate_model "$models" "$BIN" --subset valid "${VALIDATE[@]}"
    say "$row: perplexity $(json_ppl "$WORK/systems/$models/test.json") on newstest2014, \
$(json_ppl "$WORK/systems/$models/valid.json") on newstest2013"
  fi
  for out in "${OUTS[@]}"; do
    echo -n "$row $(basename "$out"): tokenized BLEU (as the paper): " >&2
    score "$out.hyp" "$REF" "$out.tok_bleu.json" --tokenize none >&2
    if [[ -n "$ref" ]]; then
      detok "$out"
      echo -n "$row $(basename "$out"): sacreBLEU on detokenized text$([[ $SPLIT == test1 ]] && echo " (NIST BLEU, Table 2)"): " >&2
      score "$out.detok" "$ref" "$out.sacrebleu.json" >&2
    elif [[ -n "$DATA" ]]; then
      say "no untokenized ${SPLIT_FILE[$SPLIT]} reference: give --raw-ref$([[ $SPLIT == test1 ]] && echo -2015) FILE \
(sacrebleu -t ${SACREBLEU_SET[$SPLIT]} -l en-de --echo ref > FILE) for sacreBLEU on detokenized text"
    else
      say "no untokenized ${SPLIT_FILE[$SPLIT]} reference: sacreBLEU's ${SACREBLEU_SET[$SPLIT]} could not be \
fetched ($WORK/raw/sacrebleu_${SACREBLEU_SET[$SPLIT]}.log); give --raw-ref$([[ $SPLIT == test1 ]] && echo -2015) FILE"
    fi
  done
  [[ -n "$GOLD" ]] && align_row "$row"
  return 0
}
json_ppl() { python -c "import json,sys; print(f\"{json.load(open(sys.argv[1]))['ppl']:.2f}\")" "$1"; }

# align_key ROW: the key of WORK/rows/ROW/gold.aer
align_key() {
  local key="" m
  for m in $(row_models "$1"); do key+="model $(ident "$WORK/systems/$m/model.pt")"$'\n'; done
  key+="gold: $(data_key "$GOLD" "$GOLD_TEXT.en" "$GOLD_TEXT.de") first $GOLD_FIRST"$'\n'
  key+="$(code_version align "$REPO/scripts/eval/force_align.py" "$REPO/scripts/eval/aer.py" "${FAIRSEQ_DISTS[@]}")"
  printf '%s' "$key"
}

# align_row ROW: AER (Table 6) of the row's model(s) (an ensemble: attention averaged) on the
# gold set: forced alignment of the gold's sentence pairs, one link per German word, read as
# footnote 14 (--paper-convention), against --gold-align; WORK/rows/ROW/gold.{align,aer}
align_row() {
  local row="$1" dir="$WORK/rows/$1" m paths=() path models
  models="$(row_models "$row")"
  for m in $models; do
    [[ "$m" == base || "$m" == reverse || "$m" == dropout ]] && { say "$row: no attention, no AER"; return; }
    paths+=("$WORK/systems/$m/model.pt")
  done
  need_file "$GOLD" "--gold-align: gold word alignments (see examples/wmt14_en_de/README.md)"
  [[ -n "$GOLD_TEXT" ]] || die "--gold-align needs --gold-text PREFIX (PREFIX.en, PREFIX.de: the gold set's sentences)"
  need_file "$GOLD_TEXT.en" "--gold-text: the gold set's English sentences, tokenized as the release"
  need_file "$GOLD_TEXT.de" "--gold-text: the gold set's German sentences, tokenized as the release"
  local first second swap=()
  case "$GOLD_FIRST" in
    de) first="$GOLD_TEXT.de" second="$GOLD_TEXT.en" swap=(--swap-test) ;;  # force_align: en-de links
    en) first="$GOLD_TEXT.en" second="$GOLD_TEXT.de" ;;
  esac
  path="$(IFS=:; echo "${paths[*]}")"
  local key; key="$(align_key "$row")"
  if ! fresh "$dir/gold.aer" "$key"; then
    python "$REPO/scripts/eval/force_align.py" "$BIN" --path "$path" -s en -t de --source "$GOLD_TEXT.en" \
      --target "$GOLD_TEXT.de" --paper-convention --output "$dir/gold.align" 2> "$dir/gold.align.log" \
      || { tail -5 "$dir/gold.align.log" >&2; die "force_align.py failed for $row ($dir/gold.align.log)"; }
    python "$REPO/scripts/eval/aer.py" "$GOLD" "$dir/gold.align" "${swap[@]+"${swap[@]}"}" --first-text "$first" \
      --second-text "$second" > "$dir/gold.aer.part" 2> "$dir/gold.aer.log" \
      || { tail -5 "$dir/gold.aer.log" >&2; rm -f "$dir/gold.aer" "$dir/gold.aer.part"; die "aer.py failed for $row ($dir/gold.aer.log)"; }
    mv "$dir/gold.aer.part" "$dir/gold.aer"
    stamp "$dir/gold.aer" "$key"
  fi
  say "$row: $(cat "$dir/gold.aer") (links: $dir/gold.align)"
}

# time_epoch ROW: time UPDATES updates of the row's first model on this machine, extrapolate
time_epoch() {
  local row="$1" m; m="$(row_models "$row" | cut -d' ' -f1)"
  prepared_wmt; model_flags "$m"
  local dir="$WORK/timing/$m"
  rm -rf "$dir"; mkdir -p "$dir"
  say "$m: timing $UPDATES updates after one untimed (log: $dir/train.log)"
  fairseq-train "$BIN" --user-dir "$REPO/fairseq_luong" "${MODEL_ARGS[@]}" "${DEVICE[@]+"${DEVICE[@]}"}" \
    --max-update $((UPDATES + 1)) --log-interval 1 --log-format simple --no-progress-bar \
    --disable-validation --no-save --save-dir "$dir" "${EXTRA[@]+"${EXTRA[@]}"}" > "$dir/train.log" 2>&1 \
    || { tail -20 "$dir/train.log" >&2; die "fairseq-train failed ($dir/train.log)"; }
  local bsz; bsz="$(grep -o -- '--batch-size [0-9]*' <<< "${MODEL_ARGS[*]}" | tail -1 | cut -d' ' -f2)"
  say "$m on $(hostname): $(nproc) cores, $(lscpu | sed -n 's/^Model name: *//p' | head -1), \
device ${DEVICE[*]:-cpu}"
  python "$TOOLS" time-epoch "$dir/train.log" --batch-size "$bsz"
}

# plan [ROW...]: what the run will do and need (examples/wmt14_en_de/plan.py); stops
# (status 1) when the disk cannot hold it
plan() {
  local rows=("$@") r m spec=""
  (( ${#rows[@]} )) || rows=("${ROW_NAMES[@]}")
  for r in "${rows[@]}"; do check_row "$r"; done
  for r in "${rows[@]}"; do spec+="row	$r	$(row_models "$r" | tr ' ' ,)	$(row_field "$r" what)"$'\n'; done
  for m in $(all_models "${rows[@]}"); do
    model_args "$m"
    spec+="model	$m	$(key_of "${TRAIN_ARGS[@]}" "${EXTRA[@]+"${EXTRA[@]}"}")"$'\n'
  done
  printf '%s' "$spec" | PYTHONPATH="$REPO/examples/common${PYTHONPATH:+:$PYTHONPATH}" python "$HERE/plan.py" --work "$WORK" --src-dir "$SRC_DIR" --gpus "$GPUS" \
    --reserve "$RESERVE" --bin "$BIN" $([[ -n "$DATA" ]] && echo --have-release) \
    || die "the plan does not fit: see above"
}

# --------------------------------------------------------------------------
# table: every row's fresh results beside the paper's; a result whose model, data,
# options or code changed since it was made is not printed, and the notes say why
table() {
  local row models pppl pbleu paer split notes=() m
  mkdir -p "$WORK"
  local fresh_data=0; fresh "$BIN/.done" "$(prepare_key)" 2>/dev/null && fresh_data=1
  (( fresh_data )) || notes+=("no prepared data (or stale): nothing is fresh (bash $0 prepare)")
  remember_idents "$BIN/.done" "$RAW/.done" "$WORK"/systems/*/{trained,model.pt}  # each keys every row it is in
  local systems=()
  {
    printf '| row | models | test set | paper ppl | paper BLEU | ppl (newstest2014) | valid ppl (newstest2013) | tokenized BLEU | +unk | sacreBLEU (detok) | paper AER | AER |\n'
    printf '|---|---|---|---|---|---|---|---|---|---|---|---|\n'
    for row in "${ROW_NAMES[@]}"; do
      models="$(row_field "$row" models)" pppl="$(row_field "$row" paper_ppl)" pbleu="$(row_field "$row" paper_bleu)"
      models="${models// /,}" paer="$(row_field "$row" paper_aer)" split="$(row_field "$row" split)"
      local d="$WORK/rows/$row" ppl="-" vppl="-" aer="-" tok="-" unk="-" sb="-" sb_plain="" sb_unk="" why="" ok=1
      if (( fresh_data )); then
        for m in ${models//,/ }; do
          why="$(model_state "$m")"; [[ -z "$why" ]] || { ok=0; break; }
        done
      else ok=0; fi
      if (( ok )); then
        row_outputs "$row"
        if [[ -n "$pppl" && "$models" != *,* ]]; then
          ppl="$(fresh_json "$WORK/systems/$models/test.json" "$(validate_key "$models" "$BIN" test "${VALIDATE[@]}")" ppl)"
          vppl="$(fresh_json "$WORK/systems/$models/valid.json" "$(validate_key "$models" "$BIN" valid "${VALIDATE[@]}")" ppl)"
        fi
        local out rawref; rawref="$(raw_reference "$split")"
        for out in "${OUTS[@]}"; do
          local gen=(); eval "gen=(${GEN_OF[$out]})"
          if ! fresh "$out.hyp" "$(translate_key "${BIN_OF[$out]}" "$PATHS" "$REF" "${gen[@]}")"; then
            why="${why:-not translated with these models and options (bash $0 eval $row)}"; continue
          fi
          local t s="-"
          t="$(fresh_json "$out.tok_bleu.json" "$(score_key "$out.hyp" "$REF" --tokenize none)" score)"
          if [[ -n "$rawref" ]] && fresh "$out.detok" "$(detok_key "$out")"; then
            s="$(fresh_json "$out.sacrebleu.json" "$(score_key "$out.detok" "$rawref")" score)"
          fi
          [[ "$t" == - ]] && why="${why:-not scored (bash $0 eval $row)}"
          if [[ "$out" == *.unk ]]; then unk="$t" sb_unk="$s"; else tok="$t" sb_plain="$s"; fi
          local label="$row"; [[ "$out" == *.unk ]] && label+=+unk
          [[ "$t" != - && "$split" == test ]] && systems+=("$label=$out.hyp")
        done
        if [[ -n "$sb_plain" && -n "$sb_unk" ]]; then sb="$sb_plain / $sb_unk"; else sb="${sb_plain:-${sb_unk:--}}"; fi
        [[ -f "$d/gold.aer" && -n "$GOLD" ]] && fresh "$d/gold.aer" "$(align_key "$row")" \
          && aer="$(sed -n 's/^AER = \([0-9.]*\).*/\1/p' "$d/gold.aer")"
      fi
      [[ -n "$why" ]] && notes+=("$row: $why")
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$row" "${models//,/ }" \
        "${SPLIT_FILE[$split]}" "${pppl:--}" "${pbleu:--}" "$ppl" "$vppl" "$tok" "$unk" "${sb:--}" "$paer" "$aer"
    done
    echo
    echo "Only results made from the current data, models, options and code are shown (\`bash $0 table\`, $(date -u '+%F'))."
    if (( ${#notes[@]} )); then echo; echo "Missing:"; printf -- '- %s\n' "${notes[@]}"; fi
  } > "$WORK/results.md.part"  # not a pipe: the loop fills `systems`
  mv "$WORK/results.md.part" "$WORK/results.md"
  cat "$WORK/results.md"
  say "results: $WORK/results.md"
  rm -f "$WORK/bleu_by_length.md" "$WORK/bleu_by_length.png"
  (( ${#systems[@]} )) || return 0
  echo
  # BLEU by source length (Fig. 6), tokenized as the paper, of every fresh newstest2014 translation
  report bleu_by_length.py "$WORK/bleu_by_length" python "$REPO/scripts/eval/bleu_by_length.py" "${systems[@]}" \
    --source "$SRC_DIR/newstest2014.en" --reference "$SRC_DIR/newstest2014.de" --tokenize none \
    --png "$WORK/bleu_by_length.png"
  say "BLEU by source length: $WORK/bleu_by_length.md, $WORK/bleu_by_length.png"
}
# fresh_json FILE KEY FIELD: FILE's FIELD (2 decimals) when FILE is fresh for KEY, else -
fresh_json() {
  if fresh "$1" "$2"; then python -c "import json,sys; print(f\"{json.load(open(sys.argv[1]))[sys.argv[2]]:.2f}\")" "$1" "$3"
  else echo -; fi
}

cmd="${1:-}"; [[ $# -gt 0 ]] && shift
case "$cmd" in
  plan) device_flags; plan "$@" ;;
  prepare) prepare; say "prepared: $BIN" ;;
  train) [[ $# -eq 1 ]] || { usage; exit 2; }; check_row "$1"; device_flags; train_row "$1" "${EXTRA[@]+"${EXTRA[@]}"}" ;;
  translate) [[ $# -eq 1 ]] || { usage; exit 2; }; check_row "$1"; device_flags; translate_row "$1" ;;
  eval) [[ $# -eq 1 ]] || { usage; exit 2; }; check_row "$1"; device_flags; evaluate_row "$1" ;;
  all)
    rows=("$@"); [[ ${#rows[@]} -gt 0 ]] || rows=("${ROW_NAMES[@]}")
    for r in "${rows[@]}"; do check_row "$r"; done
    device_flags
    plan "${rows[@]}"
    prepare
    for r in "${rows[@]}"; do train_row "$r" "${EXTRA[@]+"${EXTRA[@]}"}"; done
    for r in "${rows[@]}"; do evaluate_row "$r"; done
    table ;;
  table) device_flags; table ;;
  rows) "${ROWS_PY[@]}" list ;;
  time-epoch) [[ $# -eq 1 ]] || { usage; exit 2; }; check_row "$1"; device_flags; time_epoch "$1" ;;
  *) usage; exit 2 ;;
esac
