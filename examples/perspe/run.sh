#!/usr/bin/env bash
# perSPE (Oka, Tanaka & Nagata, NLP2022) on English->Japanese with fairseq_luong.
#
#   run.sh plan [NAME...]           what the run will do: systems, seeds, updates, batch per GPU,
#                                   checkpoints kept and disk, time on a named GPU; refuses when
#                                   the disk cannot hold it
#   run.sh prepare                  extract, normalise, joint SentencePiece, binarize, chunk, project
#   run.sh train NAME [-- OPTIONS]  train system NAME once per seed in $SEEDS
#   run.sh eval NAME                average the last checkpoints of each seed, translate test,
#                                   score; the table of NAME
#   run.sh table NAME...            fresh systems side by side (mean, sd, range over seeds)
#   run.sh all [NAME...] [-- OPT]   plan, prepare, train and eval the named systems (default:
#                                   spe_spe spe_perspe), table; OPT go to every system
#   run.sh systems                  the paper's systems this recipe names, with the paper's BLEU
#
# The data (one of the three):
#   --aspec DIR      the ASPEC-JE folder (train/train-1.txt, dev/dev.txt, test/test.txt);
#                    --aspec-train: its training files (default "train-1.txt", as the paper)
#   --iwslt DIR      IWSLT17 En-Ja as released (train.tags.en-ja.{en,ja}, IWSLT17.TED.*.en-ja.*.xml)
#                    with --jparacrawl FILE (JParaCrawl's en-ja TSV) for Table 2: IWSLT17 train
#                    cleaned with clean-corpus-n plus --jparacrawl-pairs random JParaCrawl pairs
#                    (default 4000000); --iwslt-dev, --iwslt-test: the sets (default dev2010, tst2015)
#   --data DIR       {train,dev,test}.{en,ja}, one sentence a line (small_parallel_enja, ...)
# Settings:
#   --preset P       paper: the paper's setup (Transformer base, joint 16K SentencePiece,
#                    shared embeddings; for GPUs); small: a 2+2-layer, 128-dim model for
#                    small_parallel_enja on a CPU, with --table 1 (default: paper)
#   --table T        whose batch size: 2 or 3 (8192 tokens per update, default 3), 1 or 4 (2048)
#   --gpus N         GPUs fairseq-train will use (default 1)
#   --max-tokens N   tokens per GPU and step (default: the whole batch); --update-freq is
#                    batch / (GPUs x max tokens) and must come out whole
#   --seeds "S..."   seeds per system (default "1 2 3"); eval and table report mean and spread
#   --vocab N        joint SentencePiece vocabulary (default 16000 paper, 8000 small)
#   --max-update N   updates (default 100000 paper, 2000 small)
#   --average N, --beam N, --lenpen X  decoding: the last N checkpoints averaged, beam,
#                    fairseq's --lenpen (default 5, 4, 0.6 paper, as Vaswani et al.; 1, 5, 1.0 small)
#   --ja-segmented 1 the Japanese has spaces between words, as small_parallel_enja: they
#                    are removed (default 0)
#   --work-dir DIR   where everything goes (default: runs/perspe/<name of the data folder>)
#   --reserve GB     disk plan and all leave free (default 0)
#   --lock FILE      training and translation run under `flock FILE`
# Each flag may also be given as the environment variable its words name in capitals
# (ASPEC, DATA, PRESET, TABLE, GPUS, MAX_TOKENS, SEEDS, ..., WORK for --work-dir,
# PERSPE_LOCK for --lock); a flag wins over the variable. As in every recipe:
#   RETRAIN=1        a seed trained with other options is deleted and trained again
#                    (default: refuse and say what differs)
#   ACCEPT_CODE=1    keep a trained seed across a change of the training code (recorded in
#                    its code.accepted; default: refuse and name the changed files)
#
# NAME is a folder under $WORK/systems; OPTIONS after -- choose the system, e.g.
#   run.sh --data DIR train spe_perspe -- --encoder-pos spe --decoder-pos perspe --perturb-range 1
# Every step is keyed on its inputs, options and code (examples/common/recipe.sh,
# "Freshness"): a finished step is skipped; a preparation stage whose input, setting or
# code changed (or whose files were partly deleted) is made again; a seed's training
# resumes from checkpoint_last.pt; a seed is `trained` only when it reached MAX_UPDATE (or
# fairseq stopped it early: --patience N after --; such a seed is never resumed);
# eval translates only trained, fresh seeds and redoes what their models changed; table
# averages the fresh seeds of SEEDS and names the missing ones. Training prints one line
# per epoch; the full log is named.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
RECIPE=perspe
SPM_TOOL="$REPO/examples/common/spm_tool.py"  # shared with the other recipes
usage() { sed -n "2,$(grep -n '^set -euo' "$0" | cut -d: -f1)p" "$0" | sed '$d; s/^# \{0,1\}//'; }
source "$REPO/examples/common/recipe.sh"

# flags set the variables the environment may also set (a flag wins)
declare -A OPTS=([--aspec]=ASPEC [--aspec-train]=ASPEC_TRAIN [--iwslt]=IWSLT [--jparacrawl]=JPARACRAWL
  [--jparacrawl-pairs]=JPARACRAWL_PAIRS [--iwslt-dev]=IWSLT_DEV [--iwslt-test]=IWSLT_TEST [--data]=DATA
  [--preset]=PRESET [--table]=TABLE [--gpus]=GPUS [--max-tokens]=MAX_TOKENS [--seeds]=SEEDS [--vocab]=VOCAB
  [--max-update]=MAX_UPDATE [--average]=AVERAGE [--beam]=BEAM [--lenpen]=LENPEN [--ja-segmented]=JA_SEGMENTED
  [--work-dir]=WORK [--reserve]=RESERVE [--lock]=PERSPE_LOCK)
parse_options "$@"
set -- "${POS[@]+"${POS[@]}"}"

PRESET="${PRESET:-paper}"
TABLE="${TABLE:-3}"
GPUS="${GPUS:-1}"
SEEDS="${SEEDS:-1 2 3}"
JA_SEGMENTED="${JA_SEGMENTED:-0}"
RESERVE="${RESERVE:-0}"
case "$TABLE" in
  2|3) BATCH=8192 ;;
  1|4) BATCH=2048 ;;
  *) echo "run.sh: --table (TABLE) must be 1, 2, 3 or 4, not $TABLE" >&2; exit 2 ;;
esac
case "$PRESET" in
  paper)  # Vaswani et al. (2017) base, as the paper (see examples/perspe/README.md); the
          # last 5 checkpoints averaged (Vaswani et al.'s were 10 minutes apart: 1,500
          # updates at their 0.4 s a step), beam 4, length penalty 0.6, output <= input + 50
    VOCAB="${VOCAB:-16000}" MAX_UPDATE="${MAX_UPDATE:-100000}"
    AVERAGE="${AVERAGE:-5}" BEAM="${BEAM:-4}" LENPEN="${LENPEN:-0.6}" MAX_LEN=(--max-len-a 1 --max-len-b 50)
    MODEL=(--arch transformer_perspe --share-all-embeddings --dropout 0.1
           --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-9 --clip-norm 0.0
           --lr 0.0007 --lr-scheduler inverse_sqrt --warmup-updates 4000
           --save-interval-updates 1500 --keep-interval-updates 5 --log-interval 100) ;;
  small)  # small_parallel_enja on a CPU: 2+2 layers of 128, tied embeddings
    VOCAB="${VOCAB:-8000}" MAX_UPDATE="${MAX_UPDATE:-2000}"
    AVERAGE="${AVERAGE:-1}" BEAM="${BEAM:-5}" LENPEN="${LENPEN:-1.0}" MAX_LEN=()
    MODEL=(--arch transformer_perspe --share-all-embeddings --dropout 0.1
           --encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 128 --decoder-embed-dim 128
           --encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512
           --encoder-attention-heads 4 --decoder-attention-heads 4
           --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-9 --clip-norm 0.0
           --lr 0.002 --lr-scheduler inverse_sqrt --warmup-updates 400
           --save-interval-updates 1000 --keep-interval-updates 1 --log-interval 100) ;;
  *) echo "run.sh: --preset (PRESET) must be paper or small, not $PRESET" >&2; exit 2 ;;
esac
for v in GPUS MAX_UPDATE VOCAB AVERAGE BEAM; do
  flag="--$(tr 'A-Z_' 'a-z-' <<< "$v")"; check_number "$flag ($v)" "${!v}" count "a whole number"
done
check_number "--lenpen (LENPEN)" "$LENPEN" positive "fairseq's length penalty"
check_number "--reserve (RESERVE)" "$RESERVE" integer "the disk to leave free in GB"
MAX_TOKENS="${MAX_TOKENS:-$(( BATCH / GPUS ))}"
if (( MAX_TOKENS * GPUS > BATCH || BATCH % (MAX_TOKENS * GPUS) != 0 )); then
  echo "run.sh: a batch of $BATCH tokens (--table $TABLE) is not a whole number of steps of" \
       "--max-tokens $MAX_TOKENS on --gpus $GPUS; choose --max-tokens dividing $(( BATCH / GPUS ))" >&2
  exit 2
fi
UPDATE_FREQ=$(( BATCH / (MAX_TOKENS * GPUS) ))

ASPEC_TRAIN="${ASPEC_TRAIN:-train-1.txt}"
JPARACRAWL_PAIRS="${JPARACRAWL_PAIRS:-4000000}" IWSLT_DEV="${IWSLT_DEV:-dev2010}" IWSLT_TEST="${IWSLT_TEST:-tst2015}"
if [[ -n "${ASPEC:-}" ]]; then SOURCE="aspec:$ASPEC:$ASPEC_TRAIN"; NAME_OF_DATA="$(basename "$ASPEC")"
elif [[ -n "${IWSLT:-}" ]]; then
  SOURCE="iwslt:$IWSLT:${JPARACRAWL:-}:$JPARACRAWL_PAIRS:$IWSLT_DEV:$IWSLT_TEST"; NAME_OF_DATA="$(basename "$IWSLT")"
elif [[ -n "${DATA:-}" ]]; then SOURCE="text:$DATA"; NAME_OF_DATA="$(basename "$DATA")"
else SOURCE=""; NAME_OF_DATA=""; fi
WORK="${WORK:-$REPO/runs/perspe/${NAME_OF_DATA:-none}}"
recipe_init
train_launcher "$GPUS"  # several GPUs: torchrun starts one fairseq-train process per GPU

# The paper's systems (encoder/decoder positions), the table and BLEU the paper reports
# for each: fairseq_luong/paper_settings/oka2022.py
SYSTEMS_PY=(python -m fairseq_luong.paper_settings.oka2022)
mapfile -t SYSTEM_NAMES < <("${SYSTEMS_PY[@]}" names)
is_system() { local n; for n in "${SYSTEM_NAMES[@]}"; do [[ "$n" == "$1" ]] && return 0; done; return 1; }
system_options() {  # system_options NAME: OPTIONS=(the named system's options), or die
  is_system "$1" || die "unknown system '$1' (bash $0 systems)"
  mapfile -t OPTIONS < <("${SYSTEMS_PY[@]}" options "$1")
}

# The lock the study's benchmark holds around heavy steps (training, translation)
lock_heavy() { if [[ -n "${PERSPE_LOCK:-}" ]]; then exec {LOCK_FD}>"$PERSPE_LOCK"; flock "$LOCK_FD"; fi; }
unlock_heavy() { if [[ -n "${PERSPE_LOCK:-}" ]]; then flock -u "$LOCK_FD"; exec {LOCK_FD}>&-; fi; }

# --------------------------------------------------------------------------
# prepare: five stages, each a folder stamped with the key of what made it:
#   raw      the text as released (ASPEC, IWSLT + JParaCrawl, or DATA), spaces removed from
#            segmented Japanese (JA_SEGMENTED=1)
#   text     one normalisation (scripts/data/normalize_text.py)
#   spm      the joint SentencePiece model and the pieces
#   chunks   the Japanese phrases of train and dev (scripts/data/chunk_japanese.py + its grammar)
#   data-bin fairseq-preprocess --joined-dictionary and the phrase ids projected onto the
#            pieces (train and valid .ja.chunks)
# A stage is made again when its input's content, its settings or its code changed, or
# when its files are not those it made; what comes out the same keeps later stages (and
# trained models) fresh.
stage_key() {  # stage_key STAGE: the key of WORK/STAGE/.done
  case "$1" in
    raw)
      local files=()
      case "$SOURCE" in
        aspec:*) local f; for f in $ASPEC_TRAIN; do files+=("$ASPEC/train/$f"); done
                 files+=("$ASPEC/dev/dev.txt" "$ASPEC/test/test.txt")
                 printf 'source %s ja-segmented %s\ninputs %s\n%s' "$SOURCE" "$JA_SEGMENTED" \
                   "$(data_key "${files[@]}")" "$(code_version raw "$HERE/aspec_to_text.py")" ;;
        iwslt:*) printf 'source %s ja-segmented %s\ninputs %s\n%s' "$SOURCE" "$JA_SEGMENTED" \
                   "$(data_key "$IWSLT"/* ${JPARACRAWL:+"$JPARACRAWL"})" \
                   "$(code_version raw "$HERE/iwslt_to_text.py" --dist mecab-python3 ipadic)" ;;
        text:*)  printf 'source %s ja-segmented %s\ninputs %s\n%s' "$SOURCE" "$JA_SEGMENTED" \
                   "$(data_key "$DATA"/{train,dev,test}.{en,ja})" "$(code_version raw)" ;;
      esac ;;
    text) printf 'from %s\n%s' "$(ident "$WORK/raw/.done")" "$(code_version text "$REPO/scripts/data/normalize_text.py")" ;;
    spm) printf 'vocab %s\nfrom %s\n%s' "$VOCAB" "$(ident "$WORK/text/.done")" \
           "$(code_version spm "$SPM_TOOL" --dist sentencepiece)" ;;
    chunks) printf 'from %s\n%s' "$(ident "$WORK/text/.done")" \
              "$(code_version chunks "$REPO/scripts/data/chunk_japanese.py" --dist mecab-python3 ipadic nltk)" ;;
    data-bin) printf 'from %s and %s\n%s' "$(ident "$WORK/spm/.done")" "$(ident "$WORK/chunks/.done")" \
                "$(code_version data-bin "$REPO/scripts/data/project_chunks.py" --dist sentencepiece ve-fairseq fairseq)" ;;
  esac
}
STAGES=(raw text spm chunks data-bin)

make_raw() {
  local split lang
  if [[ "$SOURCE" == aspec:* ]]; then
    say "extracting ASPEC-JE ($ASPEC)"
    # shellcheck disable=SC2086  # a list of file names
    python "$HERE/aspec_to_text.py" --aspec "$ASPEC" --output "$WORK/raw" --train $ASPEC_TRAIN
  elif [[ "$SOURCE" == iwslt:* ]]; then
    [[ -n "${JPARACRAWL:-}" ]] || die "--iwslt needs --jparacrawl FILE (JParaCrawl's en-ja TSV): the paper adds \
$JPARACRAWL_PAIRS random JParaCrawl pairs (--jparacrawl-pairs 0 for IWSLT17 alone)"
    say "extracting IWSLT17 En-Ja ($IWSLT) and $JPARACRAWL_PAIRS random pairs of $JPARACRAWL"
    python "$HERE/iwslt_to_text.py" --iwslt "$IWSLT" --jparacrawl "$JPARACRAWL" --pairs "$JPARACRAWL_PAIRS" \
      --dev "$IWSLT_DEV" --test "$IWSLT_TEST" --output "$WORK/raw"
  else
    for split in train dev test; do for lang in en ja; do
      need_file "$DATA/$split.$lang" "--data must hold {train,dev,test}.{en,ja} (see examples/perspe/README.md)"
      cp "$DATA/$split.$lang" "$WORK/raw/$split.$lang"
    done; done
  fi
  if [[ "$JA_SEGMENTED" == 1 ]]; then
    for split in train dev test; do sed -i 's/ //g' "$WORK/raw/$split.ja"; done
  elif head -1000 "$WORK/raw/train.ja" | awk '/[^ ] [^ ]/ {n++} END {exit !(NR > 0 && n > NR / 2)}'; then
    say "warning: most lines of train.ja have spaces between words; if the Japanese is" \
        "word-segmented (KyTea, MeCab), set JA_SEGMENTED=1"
  fi
  for split in train dev test; do
    [[ $(wc -l < "$WORK/raw/$split.en") == $(wc -l < "$WORK/raw/$split.ja") ]] \
      || die "$split.en and $split.ja differ in line count ($WORK/raw)"
  done
}

make_text() {
  # One normalisation (NFKC, control and format characters, spacing) of both sides
  # before anything else; SentencePiece then runs with its identity rule.
  say "normalising the raw text (scripts/data/normalize_text.py)"
  local ins=() outs=() split lang
  for split in train dev test; do for lang in en ja; do
    ins+=("$WORK/raw/$split.$lang"); outs+=("$WORK/text/$split.$lang")
  done; done
  python "$REPO/scripts/data/normalize_text.py" -i "${ins[@]}" -o "${outs[@]}"
}

make_spm() {
  local split lang
  say "joint SentencePiece model, at most $VOCAB pieces, on train.en + train.ja"
  python "$SPM_TOOL" train --input "$WORK/text/train.en" "$WORK/text/train.ja" \
    --model-prefix "$WORK/spm/joint" --vocab-size "$VOCAB" --character-coverage 0.9995 \
    --normalization-rule-name identity
  for split in train dev test; do for lang in en ja; do
    python "$SPM_TOOL" encode --model "$WORK/spm/joint.model" \
      < "$WORK/text/$split.$lang" > "$WORK/spm/$split.$lang.part"
    mv "$WORK/spm/$split.$lang.part" "$WORK/spm/$split.$lang"
  done; done
}

make_chunks() {
  say "chunking train.ja and dev.ja (MeCab + nltk)"
  lock_heavy
  python "$REPO/scripts/data/chunk_japanese.py" --workers "$(nproc)" \
    --input "$WORK/text/train.ja" "$WORK/text/dev.ja" \
    --output "$WORK/chunks/train.ja" "$WORK/chunks/dev.ja"
  unlock_heavy
}

make_data-bin() {
  say "fairseq-preprocess --joined-dictionary"
  fairseq-preprocess -s en -t ja --joined-dictionary --trainpref "$WORK/spm/train" \
    --validpref "$WORK/spm/dev" --testpref "$WORK/spm/test" --destdir "$WORK/data-bin" \
    --workers "$(nproc)" > "$WORK/preprocess.log" 2>&1 \
    || { tail -20 "$WORK/preprocess.log" >&2; die "fairseq-preprocess failed (log: $WORK/preprocess.log)"; }
  # Phrases of the Japanese side, projected onto its pieces (train and dev: only training
  # perturbs; test needs none). A line that cannot be projected is named and gets one
  # phrase per piece (token-level offsets); one odd sentence never stops the whole corpus
  say "projecting the phrases onto the pieces"
  python "$REPO/scripts/data/project_chunks.py" --spm-model "$WORK/spm/joint.model" \
    --on-mismatch token --pieces "$WORK/spm/train.ja" "$WORK/spm/dev.ja" \
    --chunks "$WORK/chunks/train.ja" "$WORK/chunks/dev.ja" \
    --output "$WORK/data-bin/train.en-ja.ja.chunks" "$WORK/data-bin/valid.en-ja.ja.chunks"
}

prepare() {
  [[ -n "$SOURCE" ]] || die "give --aspec DIR (ASPEC-JE), --iwslt DIR with --jparacrawl FILE, or --data DIR \
({train,dev,test}.{en,ja}); see examples/perspe/README.md"
  local t0=$SECONDS stage key did=0 why
  for stage in "${STAGES[@]}"; do
    key="$(stage_key "$stage")"
    fresh "$WORK/$stage/.done" "$key" && continue
    if [[ -e "$WORK/$stage/.done.key" ]]; then
      why="$(stale_reason "$WORK/$stage/.done" "$key")"
      # other settings (data source, JA_SEGMENTED, VOCAB): refused, as the seeds trained
      # on this WORK would be lost; other input files, code or an upstream stage: made again
      case "$why" in
        "made with other source"|"made with other vocab")
          echo "[$RECIPE] error: $WORK/$stage was prepared with other settings:" >&2
          diff <(recorded "$WORK/$stage/.done") <(printf '%s\n' "$key") | grep '^[<>] \(source\|vocab\)' \
            | sed 's/^</  before:/; s/^>/  now:   /' >&2 || true
          die "use another WORK, or delete $WORK to prepare it again" ;;
      esac
      say "$stage: $why: making it again"
    fi
    rm -rf "${WORK:?}/$stage"; mkdir -p "$WORK/$stage"
    "make_$stage"
    touch "$WORK/$stage/.done"; stamp "$WORK/$stage/.done" "$key"
    did=1
  done
  (( did )) && say "prepared $WORK/data-bin ($(( SECONDS - t0 )) s)"
  return 0
}
prepared() {  # stop unless every stage is fresh
  local stage
  for stage in "${STAGES[@]}"; do
    fresh "$WORK/$stage/.done" "$(stage_key "$stage")" \
      || die "$WORK/$stage is $(stale_reason "$WORK/$stage/.done" "$(stage_key "$stage")"): run prepare first (with the same data and --work-dir)"
  done
}

# --------------------------------------------------------------------------
# seed_args NAME SEED OPTIONS...: ARGS=(every fairseq-train option of the seed but the paths)
seed_args() {
  local seed="$2"; shift 2
  ARGS=(--task translation_chunks -s en -t ja "${MODEL[@]}" --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ"
        --criterion perspe_label_smoothed_cross_entropy --label-smoothing 0.1
        --distributed-world-size "$GPUS" --max-update "$MAX_UPDATE" --seed "$seed" "$@")
}
# seed_key NAME SEED OPTIONS...: the key of the seed's `trained` marker
seed_key() { local name="$1" seed="$2"; shift 2; seed_args "$name" "$seed" "$@"
  train_key "$(ident "$WORK/data-bin/.done")" "${ARGS[@]}"; }
# settings_of ARGS...: one option and its values a line (the seed's `settings` file)
settings_of() { printf '%s\n' "$@" | awk 'NR > 1 && /^--/ {print line; line = ""}
  {line = line (line == "" ? "" : " ") $0} END {print line}'; }

train_seed() {  # NAME SEED OPTIONS...
  local name="$1" seed="$2"; shift 2
  local dir="$WORK/systems/$name/seed$seed"
  seed_args "$name" "$seed" "$@"
  local settings key; settings="$(settings_of --data "$(ident "$WORK/data-bin/.done")" "${ARGS[@]}")"
  key="$(seed_key "$name" "$seed" "$@")"
  if [[ -f "$dir/settings" && "$(cat "$dir/settings")" != "$settings" ]]; then
    if [[ "${RETRAIN:-0}" == 1 ]]; then
      say "$name seed $seed: RETRAIN=1: deleting $dir and training it again"; rm -rf "$dir"
    elif [[ "${ACCEPT_CODE:-0}" == 1 && -f "$dir/trained" && ! -f "$dir/trained.key" ]] \
         && [[ "$(grep -v '^--data ' "$dir/settings")" == "$(grep -v '^--data ' <<< "$settings")" ]]; then
      # a seed trained before the recipe keyed data and code: same options, adopted
      say "$name seed $seed: ACCEPT_CODE=1: adopting a seed trained before data and code were recorded"
      echo "$(date -u '+%F %T') adopted: trained before the recipe recorded its data and code; options unchanged" \
        >> "$dir/code.accepted"
      printf '%s\n' "$settings" > "$dir/settings"
    fi
  fi
  same_or_refuse "$dir/settings" "$settings" "$name seed $seed ($dir)" \
    "refusing to resume $name seed $seed with other options: use another NAME, or RETRAIN=1 to delete it and train again"
  if ! fresh "$dir/trained" "$key" && [[ "${RETRAIN:-0}" == 1 && -e "$dir/checkpoints/checkpoint_last.pt" ]] \
     && ! same_code_ok "$dir"; then
    say "$name seed $seed: RETRAIN=1: trained by other code: deleting $dir and training it again"
    rm -rf "$dir"; mkdir -p "$dir"; printf '%s\n' "$settings" > "$dir/settings"
  fi
  same_code_or_refuse "$dir" "$name seed $seed ($dir)" "$REPO/fairseq_luong" "${FAIRSEQ_DISTS[@]}"
  if fresh "$dir/trained" "$key"; then say "$name seed $seed: trained already ($MAX_UPDATE updates)"; return; fi
  if [[ -f "$dir/trained" && "${ACCEPT_CODE:-0}" == 1 ]] && (( $(final_updates "$dir") == MAX_UPDATE )); then
    stamp "$dir/trained" "$key" "$dir/checkpoints"; say "$name seed $seed: trained already (code change accepted)"; return
  fi
  rm -f "$dir/trained" "$dir/trained.key"
  if stopped_early "$dir"; then  # stopped by --patience: complete (a resumed run would train past its stop)
    touch "$dir/trained"; stamp "$dir/trained" "$key" "$dir/checkpoints"
    say "$name seed $seed: trained already (fairseq stopped it early after $(final_updates "$dir") updates)"; return
  fi
  say "training $name seed $seed: ${*:-(arch defaults)}; $MAX_UPDATE updates of $BATCH tokens" \
      "(= --max-tokens $MAX_TOKENS x --update-freq $UPDATE_FREQ x $GPUS GPU(s)); log: $dir/train.log"
  lock_heavy
  "${TRAIN_LAUNCHER[@]+"${TRAIN_LAUNCHER[@]}"}" fairseq-train "$WORK/data-bin" --user-dir "$REPO/fairseq_luong" \
    "${ARGS[@]}" --save-dir "$dir/checkpoints" \
    --no-epoch-checkpoints --log-format simple --no-progress-bar 2>&1 | tee -a "$dir/train.log" \
    | python "$TOOLS" progress "$name seed $seed" \
    || { tail -30 "$dir/train.log" >&2; die "training $name seed $seed failed (log: $dir/train.log)"; }
  unlock_heavy
  local done_updates; done_updates="$(final_updates "$dir")"
  # trained: MAX_UPDATE reached, or fairseq stopped it early (--patience among the options)
  (( done_updates == MAX_UPDATE )) || stopped_early "$dir" \
    || die "$name seed $seed: training ended after $done_updates of $MAX_UPDATE \
updates ($dir/train.log): not marked trained; run train again to resume it"
  touch "$dir/trained"; stamp "$dir/trained" "$key" "$dir/checkpoints"
}
# stopped_early DIR: the seed's last fairseq-train run logged fairseq's early stop (--patience)
# and then "done training" (its final checkpoint saved). The stop line is not among the log's
# last lines: the checkpoint's and the epoch's lines follow it.
stopped_early() {
  [[ -f "$1/train.log" ]] && awk '/fairseq_cli\.train \| \{/ { early = done = 0 }
    /early stop since valid performance/ { early = 1 }
    /fairseq_cli\.train \| done training/ { done = early }
    END { exit !done }' "$1/train.log"
}
# final_updates DIR: the updates of the seed's last logged state (0 when none)
final_updates() { local n; n="$(grep -o "num_updates [0-9]*" "$1/train.log" 2>/dev/null | tail -1 | cut -d' ' -f2)"; echo "${n:-0}"; }
# same_code_ok DIR: the seed was trained by the code the checkout has now
same_code_ok() { [[ -f "$1/code" && "$(cat "$1/code")" == "$(code_train)" ]]; }

check_options() {  # stop on options the settings own
  local word
  for word in "$@"; do
    case "$word" in
      --max-tokens*|--update-freq*|--seed*|--max-update*|--distributed-world-size*)
        die "$word: the batch, seeds and updates come from TABLE, GPUS, MAX_TOKENS, SEEDS and MAX_UPDATE (see run.sh --help)" ;;
    esac
  done
}

train() {  # NAME OPTIONS...
  local name="$1" seed; shift
  check_options "$@"
  prepare
  for seed in $SEEDS; do train_seed "$name" "$seed" "$@"; done
  printf '%s\n' "$(key_of "$@")" > "$WORK/systems/$name/options"
}

# --------------------------------------------------------------------------
# seed_state NAME SEED: nothing when the seed is trained and fresh (its options: those
# `train NAME` recorded in WORK/systems/NAME/options), else why not
seed_state() {
  local name="$1" seed="$2" dir="$WORK/systems/$1/seed$2" opts=()
  [[ -f "$WORK/systems/$name/options" ]] && eval "opts=($(cat "$WORK/systems/$name/options"))"
  if [[ ! -f "$dir/trained" ]]; then
    if [[ -f "$dir/train.log" ]]; then echo "seed $seed unfinished ($(final_updates "$dir") of $MAX_UPDATE updates)"
    else echo "seed $seed not trained"; fi
    return
  fi
  local key; key="$(seed_key "$name" "$seed" "${opts[@]+"${opts[@]}"}")"
  fresh "$dir/trained" "$key" || echo "seed $seed stale: $(stale_reason "$dir/trained" "$key")"
}

GEN=()
gen_args() { GEN=(--task translation_chunks -s en -t ja --gen-subset test --beam "$BEAM" --lenpen "$LENPEN"
                  "${MAX_LEN[@]+"${MAX_LEN[@]}"}" --batch-size 128 --post-process sentencepiece); }
score_code() { code_version score "$HERE/score.py" --dist sacrebleu mecab-python3 ipadic; }
bleu_key() {  # bleu_key DIR: the key of DIR/bleu.json
  printf '%s\nref %s\n%s' "$(ident "$1/test.hyp")" "$(ident "$WORK/raw/test.ja")" "$(score_code)"
}

evaluate_seed() {  # NAME SEED
  local name="$1" seed="$2" dir="$WORK/systems/$1/seed$2" why
  why="$(seed_state "$name" "$seed")"
  [[ -z "$why" ]] || die "$name $why: only trained seeds are scored (run.sh train $name; RETRAIN=1 for a stale one)"
  average_last "$name/seed$seed" "$AVERAGE"
  gen_args
  lock_heavy
  translate "$name seed $seed" "$WORK/data-bin" "$dir/model.pt" "$WORK/raw/test.ja" "$dir/test" "${GEN[@]}"
  unlock_heavy
  # fairseq's closing "BLEU4 = ..." compares unsegmented Japanese word by word (one
  # "word" a sentence) against its own T- lines: meaningless here, dropped
  sed -i '/^Generate test with beam=/d' "$dir/test.out"
  local key; key="$(bleu_key "$dir")"
  fresh "$dir/bleu.json" "$key" && return
  python "$HERE/score.py" score --hyp "$dir/test.hyp" --ref "$WORK/raw/test.ja" --json "$dir/bleu.json"
  stamp "$dir/bleu.json" "$key"
}

# table NAME...: the fresh seeds of SEEDS of each system (score.py table), and what is missing
table() {
  local name seed args=() notes=() fresh_seeds dir
  for name in "$@"; do
    fresh_seeds=""
    for seed in $SEEDS; do
      dir="$WORK/systems/$name/seed$seed"
      local why; why="$(seed_state "$name" "$seed")"
      if [[ -z "$why" ]]; then
        gen_args
        if ! fresh "$dir/model.pt" "$(average_key "$name/seed$seed" "$AVERAGE")" \
           || ! fresh "$dir/test.hyp" "$(translate_key "$WORK/data-bin" "$dir/model.pt" "$WORK/raw/test.ja" "${GEN[@]}")" \
           || ! fresh "$dir/bleu.json" "$(bleu_key "$dir")"; then
          why="seed $seed not scored with these models and settings (run.sh eval $name)"
        fi
      fi
      if [[ -n "$why" ]]; then notes+=(--note "$name: $why"); else fresh_seeds+="${fresh_seeds:+,}$seed"; fi
    done
    args+=("$name=$fresh_seeds")
  done
  python "$HERE/score.py" table --work "$WORK" --decoding "the last $AVERAGE checkpoint(s) averaged, beam $BEAM, lenpen $LENPEN" \
    "${notes[@]+"${notes[@]}"}" "${args[@]}"
}

evaluate() {  # NAME: every trained, fresh seed of SEEDS (the others are named, not scored)
  local name="$1" seed why scored=0
  for seed in $SEEDS; do
    why="$(seed_state "$name" "$seed")"
    if [[ -n "$why" ]]; then say "$name $why: not scored (run.sh train $name; RETRAIN=1 for a stale seed)"; continue; fi
    evaluate_seed "$name" "$seed"; scored=1
  done
  table "$name"
  (( scored )) || die "$name: no trained seed of --seeds \"$SEEDS\" to score"
}

# plan [NAME...]: what the run will do and need (examples/perspe/plan.py)
plan() {
  local names=("$@") name spec=""
  (( ${#names[@]} )) || names=(spe_spe spe_perspe)
  for name in "${names[@]}"; do
    if is_system "$name"; then system_options "$name"; else OPTIONS=(); fi
    seed_args "$name" 1 "${OPTIONS[@]+"${OPTIONS[@]}"}" "${EXTRA[@]+"${EXTRA[@]}"}"
    spec+="system	$name	$(key_of "${ARGS[@]}")"$'\n'
  done
  printf '%s' "$spec" | PYTHONPATH="$REPO/examples/common${PYTHONPATH:+:$PYTHONPATH}" python "$HERE/plan.py" --work "$WORK" --seeds "$SEEDS" --gpus "$GPUS" \
    --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ" --batch "$BATCH" --vocab "$VOCAB" \
    --average "$AVERAGE" --reserve "$RESERVE" --preset "$PRESET" \
    || die "the plan does not fit: see above"
}

cmd="${1:-}"; [[ $# -gt 0 ]] && shift
case "$cmd" in
  plan) plan "$@" ;;
  prepare) prepare; say "prepared: $WORK/data-bin" ;;
  train)
    [[ $# -eq 1 ]] || { usage; exit 2; }
    train "$1" "${EXTRA[@]+"${EXTRA[@]}"}" ;;
  eval) [[ $# -eq 1 ]] || { usage; exit 2; }; prepare; evaluate "$1" ;;
  table) [[ $# -ge 1 ]] || { usage; exit 2; }; table "$@" ;;
  systems) "${SYSTEMS_PY[@]}" list ;;
  all)
    names=("$@")
    (( ${#names[@]} )) || names=(spe_spe spe_perspe)
    for name in "${names[@]}"; do system_options "$name"; done
    check_options "${EXTRA[@]+"${EXTRA[@]}"}"
    plan "${names[@]}"
    prepare
    for name in "${names[@]}"; do system_options "$name"; train "$name" "${OPTIONS[@]}" "${EXTRA[@]+"${EXTRA[@]}"}"; done
    for name in "${names[@]}"; do for seed in $SEEDS; do evaluate_seed "$name" "$seed"; done; done
    table "${names[@]}" ;;
  -h|--help) usage ;;
  *) usage; exit 2 ;;
esac
