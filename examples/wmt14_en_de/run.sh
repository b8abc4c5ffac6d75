#!/usr/bin/env bash
# WMT'14 English->German as Luong, Pham & Manning (2015), section 4: Tables 1, 4 and 6.
#
#   bash examples/wmt14_en_de/run.sh [OPTIONS] prepare          get the data, filter, binarize
#   bash examples/wmt14_en_de/run.sh [OPTIONS] train ROW        train the model(s) of a row
#   bash examples/wmt14_en_de/run.sh [OPTIONS] translate ROW    translate newstest2014
#   bash examples/wmt14_en_de/run.sh [OPTIONS] eval ROW         tokenized BLEU (the paper's),
#                                                               sacreBLEU on detokenized text,
#                                                               AER with --gold-align
#   bash examples/wmt14_en_de/run.sh [OPTIONS] all [ROW...]     all of it (default: every row)
#   bash examples/wmt14_en_de/run.sh [OPTIONS] table            results so far beside the paper's
#                                                               (WORK/results.md), BLEU by length
#                                                               (WORK/bleu_by_length.{md,png})
#   bash examples/wmt14_en_de/run.sh [OPTIONS] time-epoch ROW   time a few updates of ROW's model
#                                                               here, extrapolate to one epoch
#   bash examples/wmt14_en_de/run.sh rows                       list the rows and their models
#
# Options:
#   --data-dir DIR   the Stanford release's files (train.{en,de}, newstest2012..2015.{en,de},
#                    vocab.50K.{en,de}, and for unk replacement dict.en-de); nothing is
#                    downloaded then. Without it they are downloaded from
#                    nlp.stanford.edu/projects/nmt/ into WORK/raw.
#   --work-dir DIR   (default: runs/wmt14_en_de in the checkout)
#   --raw-ref FILE   the untokenized newstest2014 German reference, for sacreBLEU on
#                    detokenized output (default: DIR/newstest2014.raw.de if it exists; without
#                    --data-dir, sacreBLEU's own copy of wmt14/full)
#   --gold-align F   gold word alignments for AER (Table 6): one line of links per sentence,
#                    sure i-j and possible ipj, 1-based (RWTH / TALP style; see README.md)
#   --gold-text P    the gold set's sentences, P.en and P.de, tokenized as the release
#   --gold-first L   the language of the links' first index: de (default: RWTH's
#                    German-English set puts German first) or en
#   --updates N      time-epoch: updates to time (default: 5, after one untimed)
#   -- ARGS          after `train ROW`: extra fairseq-train options (they override the row's)
#
# Steps are resumable: finished steps are skipped, an interrupted training resumes from
# checkpoint_last.pt; a model trained with other options is refused (delete its folder).
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
RECIPE=wmt14
URL=https://nlp.stanford.edu/projects/nmt/data/wmt14.en-de

DATA="" WORK="$REPO/runs/wmt14_en_de" RAW_REF="" GOLD="" GOLD_TEXT="" GOLD_FIRST=de UPDATES=5 BEAM=12
usage() { sed -n '2,39p' "$0" | sed 's/^# \{0,1\}//'; }
source "$REPO/examples/common/recipe.sh"
declare -A OPTS=([--data-dir]=DATA [--work-dir]=WORK [--raw-ref]=RAW_REF [--gold-align]=GOLD
                 [--gold-text]=GOLD_TEXT [--gold-first]=GOLD_FIRST [--updates]=UPDATES)
parse_options "$@"
set -- "${POS[@]+"${POS[@]}"}"
check_number --updates "$UPDATES" count "the number of updates to time"
[[ "$GOLD_FIRST" == de || "$GOLD_FIRST" == en ]] \
  || { echo "run.sh: --gold-first $GOLD_FIRST: give de or en (the language of the links' first index)" >&2; exit 2; }
recipe_init
FILES=(train.en train.de newstest2012.en newstest2012.de newstest2013.en newstest2013.de
       newstest2014.en newstest2014.de newstest2015.en newstest2015.de
       vocab.50K.en vocab.50K.de)
DICT=dict.en-de  # for unk replacement; without it the attended source word is copied
SRC_DIR="${DATA:-$WORK/raw}"
RAW="$WORK/data-raw"  # newstest2014 as text (--dataset-impl raw): --replace-unk reads the source words

# --------------------------------------------------------------------------
# Models (section 4.1) and the rows of Tables 1 and 4 that use them.
#
# All Luong models: 4 layers x 1000 cells, 1000-dim embeddings, U[-0.1, 0.1] init,
# plain SGD lr 1.0 on the gradient averaged over the batch's *sentences* (--sentence-avg),
# batches of 128, gradient norm rescaled to 5, 10 epochs halving the lr every epoch after
# the 5th (with dropout 0.2: 12 epochs, halving after the 8th), sentences <= 50 words.
PAPER_SIZE=(--encoder-layers 4 --decoder-layers 4 --encoder-embed-dim 1000 --decoder-embed-dim 1000
            --encoder-hidden-size 1000 --decoder-hidden-size 1000 --init-uniform 0.1)
PAPER_TRAIN=(--optimizer sgd --lr 1.0 --sentence-avg --batch-size 128 --clip-norm 5
             --criterion fused_label_smoothed_cross_entropy --label-smoothing 0
             --lr-scheduler fixed --lr-shrink 0.5 --skip-invalid-size-inputs-valid-test
             --log-interval 100)
NO_DROPOUT=(--dropout 0 --max-epoch 10 --force-anneal 6)   # fixed schedule: epoch e >= F gets
WITH_DROPOUT=(--dropout 0.2 --max-epoch 12 --force-anneal 9)  # lr * 0.5^(e + 1 - F)
ATTN=(--reverse-source "${WITH_DROPOUT[@]}")                  # Table 4: reverse + dropout ...

# model_flags MODEL: MODEL_ARGS=(fairseq-train options of MODEL)
model_flags() {
  local m="$1" feed=()
  case "$m" in
    base)                 MODEL_ARGS=(--arch luong_base "${NO_DROPOUT[@]}") ;;
    reverse)              MODEL_ARGS=(--arch luong_base --reverse-source "${NO_DROPOUT[@]}") ;;
    dropout)              MODEL_ARGS=(--arch luong_base --reverse-source "${WITH_DROPOUT[@]}") ;;
    global_location)      MODEL_ARGS=(--arch luong_global_location --no-input-feed "${ATTN[@]}") ;;
    global_location_feed) MODEL_ARGS=(--arch luong_global_location "${ATTN[@]}") ;;
    global_dot_feed)      MODEL_ARGS=(--arch luong_global_dot "${ATTN[@]}") ;;
    global_general_feed)  MODEL_ARGS=(--arch luong_global_general "${ATTN[@]}") ;;
    localm_dot_feed)      MODEL_ARGS=(--arch luong_localm --attention-score dot --local-window 10 "${ATTN[@]}") ;;
    localm_general_feed)  MODEL_ARGS=(--arch luong_localm --attention-score general --local-window 10 "${ATTN[@]}") ;;
    localp_dot_feed)      MODEL_ARGS=(--arch luong_localp --attention-score dot --local-window 10 "${ATTN[@]}") ;;
    localp_general_feed)  MODEL_ARGS=(--arch luong_localp --attention-score general --local-window 10 "${ATTN[@]}") ;;
    localp_general_feed_seed2)
      model_flags localp_general_feed; MODEL_ARGS+=(--seed 2); return ;;
    rnnsearch)
      # Bahdanau et al. 2014 (RNNsearch-50), section 4.2 and appendix B.2; the paper gives
      # training time (about 5 days), not epochs: 10 epochs here
      MODEL_ARGS=(--arch rnnsearch_wmt --optimizer adadelta --adadelta-rho 0.95 --adadelta-eps 1e-6
                  --lr 1.0 --batch-size 80 --clip-norm 1 --sentence-avg --criterion cross_entropy
                  --max-epoch 10 --skip-invalid-size-inputs-valid-test --log-interval 100)
      return ;;
    *) die "unknown model '$m'" ;;
  esac
  MODEL_ARGS=("${PAPER_SIZE[@]}" "${PAPER_TRAIN[@]}" "${MODEL_ARGS[@]}")
}

ENSEMBLE="global_location_feed global_dot_feed global_general_feed localm_dot_feed
          localm_general_feed localp_dot_feed localp_general_feed localp_general_feed_seed2"
# rows: NAME|models|unk replacement|paper ppl|paper BLEU|what|paper AER (Table 6)
ROWS="t1_base|base|no|10.6|11.3|Table 1: Base
t1_reverse|reverse|no|9.9|12.6|Table 1: Base + reverse
t1_dropout|dropout|no|8.1|14.0|Table 1: + dropout
t1_global_location|global_location|no|7.3|16.8|Table 1: + global attention (location)
t1_feed_input|global_location_feed|no|6.4|18.1|Table 1: + feed input
t1_localp_general|localp_general_feed|no|5.9|19.0|Table 1: + local-p attention (general) + feed input
t1_unk_replace|localp_general_feed|yes||20.9|Table 1: + unk replace
t1_ensemble|$(echo $ENSEMBLE | tr ' ' ,)|yes||23.0|Table 1: ensemble of 8 models + unk replace|0.34
t4_global_location|global_location_feed|both|6.4|18.1 / 19.3|Table 4: global (location)|0.39
t4_global_dot|global_dot_feed|both|6.1|18.6 / 20.5|Table 4: global (dot)
t4_global_general|global_general_feed|both|6.1|17.3 / 19.1|Table 4: global (general)
t4_localm_dot|localm_dot_feed|both|>7.0|x|Table 4: local-m (dot)
t4_localm_general|localm_general_feed|both|6.2|18.6 / 20.4|Table 4: local-m (general)|0.34
t4_localp_dot|localp_dot_feed|both|6.6|18.0 / 19.6|Table 4: local-p (dot)
t4_localp_general|localp_general_feed|both|5.9|19.0 / 20.9|Table 4: local-p (general)|0.36
rnnsearch|rnnsearch|no|||RNNsearch-50 (Bahdanau et al. 2014) with the same data and evaluation"

row_field() {  # row_field ROW N
  local line; line="$(grep "^$1|" <<< "$ROWS")" || die "unknown row '$1' (bash $0 rows)"
  cut -d'|' -f"$2" <<< "$line"
}
row_models() { row_field "$1" 2 | tr , ' '; }
# check_row ROW: stop unless ROW is a row of the table (called before any work: a `die`
# inside $(...) would only end that subshell)
check_row() {
  local r
  while IFS='|' read -r r _; do [[ "$r" == "$1" ]] && return 0; done <<< "$ROWS"
  die "unknown row '$1' (bash $0 rows)"
}

# --------------------------------------------------------------------------
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
  local key; key="max 50 words data: $(data_key "${FILES[@]/#/$SRC_DIR/}")"
  same_or_refuse "$WORK/prepared.options" "$key" "$WORK (prepared data)"
  fresh "$BIN/.done" "$key" && return
  local t0=$SECONDS split
  python "$REPO/scripts/data/check_parallel.py" --trainpref "$SRC_DIR/train" \
    --validpref "$SRC_DIR/newstest2013" --testpref "$SRC_DIR/newstest2014,$SRC_DIR/newstest2015" \
    "$SRC_DIR/newstest2012" -s en -t de --control-characters keep >&2
  mkdir -p "$WORK/text"
  say "keeping training pairs of at most 50 words on both sides (section 4)"
  python "$TOOLS" filter-length "$SRC_DIR/train.en" "$SRC_DIR/train.de" "$WORK/text/train" \
    --src-lang en --tgt-lang de --max-words 50
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

# fp16 when a GPU is there (the CPU has no fp16 training)
device_flags() {
  DEVICE=()
  python -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" && DEVICE=(--fp16)
  return 0
}

train_model() {
  local m="$1"; shift
  prepared; model_flags "$m"; device_flags
  train_system "$m" "$BIN" "$(cat "$BIN/.done.key")" "${MODEL_ARGS[@]}" "${DEVICE[@]+"${DEVICE[@]}"}" "$@"
}

train_row() {
  local row="$1" m models; shift
  models="$(row_models "$row")"
  for m in $models; do train_model "$m" "$@"; done
}

# translate_row ROW: WORK/rows/ROW/{test,test.unk}.hyp (tokenized, as the paper scores)
translate_row() {
  local row="$1" m paths=() unk models
  models="$(row_models "$row")"
  prepared
  for m in $models; do
    [[ -f "$WORK/systems/$m/trained" ]] || die "train $m first (bash $0 train $row)"
    average_last "$m" 1
    paths+=("$WORK/systems/$m/model.pt")
  done
  unk="$(row_field "$row" 3)"
  local gen=(--gen-subset test --beam "$BEAM" --batch-size 32 --max-len-a 1.5 --max-len-b 10)
  mkdir -p "$WORK/rows/$row"
  local path ref="$SRC_DIR/newstest2014.de"; path="$(IFS=:; echo "${paths[*]}")"  # an ensemble
  if [[ "$unk" != yes ]]; then
    translate "$row" "$BIN" "$path" "$ref" "$WORK/rows/$row/test" "${gen[@]}"
  fi
  if [[ "$unk" != no ]]; then
    # --replace-unk takes each <unk>'s source word from the source text: a raw dataset
    local dict=("$SRC_DIR/$DICT")
    [[ -s "$SRC_DIR/$DICT" ]] || { dict=(); say "$row: no $SRC_DIR/$DICT: unk replacement copies the \
attended source word (the release's dictionary: $URL/$DICT)"; }
    raw_test
    translate "$row" "$RAW" "$path" "$ref" "$WORK/rows/$row/test.unk" "${gen[@]}" --dataset-impl raw \
      --replace-unk "${dict[@]+"${dict[@]}"}"
  fi
}

# raw_test: WORK/data-raw, newstest2014 as fairseq-preprocess --dataset-impl raw writes it
# (the text beside the dictionaries)
raw_test() {
  local key; key="$(cat "$BIN/.done.key")"
  fresh "$RAW/.done" "$key" && return
  rm -rf "$RAW"
  fairseq-preprocess -s en -t de --testpref "$SRC_DIR/newstest2014" --srcdict "$WORK/text/dict.en.txt" \
    --tgtdict "$WORK/text/dict.de.txt" --destdir "$RAW" --dataset-impl raw > "$WORK/preprocess_raw.log" 2>&1 \
    || { tail -20 "$WORK/preprocess_raw.log" >&2; die "fairseq-preprocess --dataset-impl raw failed"; }
  touch "$RAW/.done"; stamp "$RAW/.done" "$key"
}

raw_reference() {
  if [[ -n "$RAW_REF" ]]; then need_file "$RAW_REF" "--raw-ref: the untokenized newstest2014 German reference"; echo "$RAW_REF"; return; fi
  if [[ -s "$SRC_DIR/newstest2014.raw.de" ]]; then echo "$SRC_DIR/newstest2014.raw.de"; return; fi
  if [[ -z "$DATA" ]]; then
    [[ -s "$WORK/raw/newstest2014.raw.de" ]] \
      || sacrebleu -t wmt14/full -l en-de --echo ref > "$WORK/raw/newstest2014.raw.de" 2>/dev/null \
      || { rm -f "$WORK/raw/newstest2014.raw.de"; return 0; }
    echo "$WORK/raw/newstest2014.raw.de"
  fi
}

evaluate_row() {
  local row="$1" dir="$WORK/rows/$1" hyp ref
  translate_row "$row"
  local m models
  models="$(row_models "$row")"
  for m in $models; do validate_model "$m" "$BIN" --batch-size 64; done
  ref="$(raw_reference)"
  for hyp in "$dir"/test.hyp "$dir"/test.unk.hyp; do
    [[ -f "$hyp" ]] || continue
    echo -n "$row $(basename "$hyp" .hyp): tokenized BLEU (as the paper): " >&2
    score "$hyp" "$SRC_DIR/newstest2014.de" "${hyp%.hyp}.tok_bleu.json" --tokenize none >&2
    if [[ -n "$ref" ]]; then
      local dkey; dkey="$(data_key "$hyp")"
      fresh "${hyp%.hyp}.detok" "$dkey" \
        || { python "$TOOLS" detok de < "$hyp" > "${hyp%.hyp}.detok"; stamp "${hyp%.hyp}.detok" "$dkey"; }
      echo -n "$row $(basename "$hyp" .hyp): sacreBLEU on detokenized text: " >&2
      score "${hyp%.hyp}.detok" "$ref" "${hyp%.hyp}.sacrebleu.json" >&2
    else
      say "no untokenized reference: give --raw-ref FILE (newstest2014 German, e.g. from \
'sacrebleu -t wmt14/full -l en-de --echo ref') for sacreBLEU on detokenized text"
    fi
  done
  [[ -n "$GOLD" ]] && align_row "$row"
  return 0
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
    *) die "--gold-first must be de or en, not '$GOLD_FIRST'" ;;
  esac
  path="$(IFS=:; echo "${paths[*]}")"
  local key="" p; for p in "${paths[@]}"; do key+="$(cat "$p.key") "; done
  key+="gold: $(data_key "$GOLD" "$GOLD_TEXT.en" "$GOLD_TEXT.de") first $GOLD_FIRST"
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
  prepared; model_flags "$m"; device_flags
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

table() {
  local row models
  mkdir -p "$WORK"
  {
    printf '| row | models | paper ppl | paper BLEU | valid ppl | tokenized BLEU | +unk | sacreBLEU (detok) | paper AER | AER |\n'
    printf '|---|---|---|---|---|---|---|---|---|---|\n'
    while IFS='|' read -r row models _ pppl pbleu _ paer; do
      local d="$WORK/rows/$row" ppl="-" aer="-"
      [[ -f "$WORK/systems/${models%%,*}/valid.json" ]] && ppl="$(python -c "import json,sys; print(json.load(open(sys.argv[1]))['ppl'])" "$WORK/systems/${models%%,*}/valid.json")"
      [[ -f "$d/gold.aer" ]] && aer="$(sed -n 's/^AER = \([0-9.]*\).*/\1/p' "$d/gold.aer")"
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$row" "${models//,/ }" "${pppl:--}" "${pbleu:--}" "$ppl" \
        "$(json_score "$d/test.tok_bleu.json")" "$(json_score "$d/test.unk.tok_bleu.json")" \
        "$(json_score "$d/test.sacrebleu.json")$( [[ -f "$d/test.unk.sacrebleu.json" ]] && echo " / $(json_score "$d/test.unk.sacrebleu.json")")" \
        "${paer:--}" "$aer"
    done <<< "$ROWS"
  } | tee "$WORK/results.md"
  # BLEU by source length (Fig. 6), tokenized as the paper, of every translated row
  local systems=()
  while IFS='|' read -r row _; do
    [[ -f "$WORK/rows/$row/test.hyp" ]] && systems+=("$row=$WORK/rows/$row/test.hyp")
    [[ -f "$WORK/rows/$row/test.unk.hyp" ]] && systems+=("$row+unk=$WORK/rows/$row/test.unk.hyp")
  done <<< "$ROWS"
  say "results: $WORK/results.md"
  (( ${#systems[@]} )) || return 0
  echo
  report bleu_by_length.py "$WORK/bleu_by_length" python "$REPO/scripts/eval/bleu_by_length.py" "${systems[@]}" \
    --source "$SRC_DIR/newstest2014.en" --reference "$SRC_DIR/newstest2014.de" --tokenize none \
    --png "$WORK/bleu_by_length.png"
  say "BLEU by source length: $WORK/bleu_by_length.md, $WORK/bleu_by_length.png"
}
json_score() { [[ -f "$1" ]] && python -c "import json,sys; print(f\"{json.load(open(sys.argv[1]))['score']:.2f}\")" "$1" || echo -; }

cmd="${1:-}"; [[ $# -gt 0 ]] && shift
case "$cmd" in
  prepare) prepare ;;
  train) [[ $# -eq 1 ]] || { usage; exit 2; }; check_row "$1"; train_row "$1" "${EXTRA[@]+"${EXTRA[@]}"}" ;;
  translate) [[ $# -eq 1 ]] || { usage; exit 2; }; check_row "$1"; translate_row "$1" ;;
  eval) [[ $# -eq 1 ]] || { usage; exit 2; }; check_row "$1"; evaluate_row "$1" ;;
  all)
    rows=("$@"); [[ ${#rows[@]} -gt 0 ]] || mapfile -t rows < <(cut -d'|' -f1 <<< "$ROWS")
    for r in "${rows[@]}"; do check_row "$r"; done
    prepare
    for r in "${rows[@]}"; do train_row "$r"; done
    for r in "${rows[@]}"; do evaluate_row "$r"; done
    table ;;
  table) table ;;
  rows) cut -d'|' -f1,2,6 <<< "$ROWS" | column -t -s'|' ;;
  time-epoch) [[ $# -eq 1 ]] || { usage; exit 2; }; check_row "$1"; time_epoch "$1" ;;
  *) usage; exit 2 ;;
esac
