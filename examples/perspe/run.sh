#!/usr/bin/env bash
# perSPE (Oka, Tanaka & Nagata, NLP2022) on English->Japanese with fairseq_luong.
#
#   run.sh prepare                  extract, normalise, joint SentencePiece, binarize, chunk, project
#   run.sh train NAME [-- OPTIONS]  train system NAME once per seed in $SEEDS
#   run.sh eval NAME                translate test with each seed, score, mean and spread
#   run.sh table NAME...            finished systems side by side (mean, sd, range over seeds)
#   run.sh all                      prepare; train and eval spe_spe and spe_perspe; table
#
# The data (one of the two):
#   ASPEC=DIR     the ASPEC-JE folder (train/train-1.txt, dev/dev.txt, test/test.txt);
#                 ASPEC_TRAIN: its training files (default "train-1.txt", the best 1M pairs)
#   DATA=DIR      {train,dev,test}.{en,ja}, one sentence a line (IWSLT17 en-ja, small_parallel_enja)
# Settings (environment variables):
#   PRESET        paper: the paper's setup (Transformer base, joint 16K SentencePiece,
#                 shared embeddings, 100K updates; for GPUs); small: a 2+2-layer, 128-dim
#                 model for small_parallel_enja on a CPU, with TABLE=1 (default: paper)
#   TABLE         whose batch size: 2 or 3 (8192 tokens per update, default 3), 1 or 4 (2048)
#   GPUS          GPUs fairseq-train will use (default 1)
#   MAX_TOKENS    tokens per GPU and step (default: the whole batch); --update-freq is
#                 BATCH / (GPUS x MAX_TOKENS) and must come out whole
#   SEEDS         seeds per system (default "1 2 3"); eval and table report mean and spread
#   VOCAB         joint SentencePiece vocabulary (default 16000 paper, 8000 small)
#   MAX_UPDATE    updates (default 100000 paper, 2000 small)
#   JA_SEGMENTED  1 if the Japanese has spaces between words, as small_parallel_enja:
#                 they are removed (default 0)
#   WORK          where everything goes (default: runs/perspe/<name of ASPEC or DATA>)
#   RETRAIN       1: a seed trained with other options is deleted and trained again
#                 (default: refuse and say what differs)
#   PERSPE_LOCK   if set, training and translation run under `flock $PERSPE_LOCK`
#
# NAME is a folder under $WORK/systems; OPTIONS after -- choose the system, e.g.
#   run.sh train spe_perspe -- --encoder-pos spe --decoder-pos perspe --perturb-range 1
# Every step is resumable: finished steps are skipped, a seed's training continues from its
# checkpoint_last.pt when its options are unchanged, eval redoes a seed whose checkpoint is
# newer than its score. Training prints one line per epoch; the full log is named.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
SPM_TOOL="$REPO/examples/common/spm_tool.py"  # shared with the other recipes

PRESET="${PRESET:-paper}"
TABLE="${TABLE:-3}"
GPUS="${GPUS:-1}"
SEEDS="${SEEDS:-1 2 3}"
JA_SEGMENTED="${JA_SEGMENTED:-0}"
case "$TABLE" in
  2|3) BATCH=8192 ;;
  1|4) BATCH=2048 ;;
  *) echo "run.sh: TABLE must be 1, 2, 3 or 4, not $TABLE" >&2; exit 2 ;;
esac
case "$PRESET" in
  paper)  # Vaswani et al. (2017) base, as the paper (see examples/perspe/README.md)
    VOCAB="${VOCAB:-16000}" MAX_UPDATE="${MAX_UPDATE:-100000}"
    MODEL=(--arch transformer_perspe --share-all-embeddings --dropout 0.1
           --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-9 --clip-norm 0.0
           --lr 0.0007 --lr-scheduler inverse_sqrt --warmup-updates 4000
           --save-interval-updates 5000 --keep-interval-updates 1 --log-interval 100) ;;
  small)  # small_parallel_enja on a CPU: 2+2 layers of 128, tied embeddings
    VOCAB="${VOCAB:-8000}" MAX_UPDATE="${MAX_UPDATE:-2000}"
    MODEL=(--arch transformer_perspe --share-all-embeddings --dropout 0.1
           --encoder-layers 2 --decoder-layers 2 --encoder-embed-dim 128 --decoder-embed-dim 128
           --encoder-ffn-embed-dim 512 --decoder-ffn-embed-dim 512
           --encoder-attention-heads 4 --decoder-attention-heads 4
           --optimizer adam --adam-betas '(0.9, 0.98)' --adam-eps 1e-9 --clip-norm 0.0
           --lr 0.002 --lr-scheduler inverse_sqrt --warmup-updates 400
           --save-interval-updates 1000 --keep-interval-updates 1 --log-interval 100) ;;
  *) echo "run.sh: PRESET must be paper or small, not $PRESET" >&2; exit 2 ;;
esac
MAX_TOKENS="${MAX_TOKENS:-$(( BATCH / GPUS ))}"
if (( MAX_TOKENS * GPUS > BATCH || BATCH % (MAX_TOKENS * GPUS) != 0 )); then
  echo "run.sh: a batch of $BATCH tokens (TABLE=$TABLE) is not a whole number of steps of" \
       "MAX_TOKENS=$MAX_TOKENS on GPUS=$GPUS; choose MAX_TOKENS dividing $(( BATCH / GPUS ))" >&2
  exit 2
fi
UPDATE_FREQ=$(( BATCH / (MAX_TOKENS * GPUS) ))

ASPEC_TRAIN="${ASPEC_TRAIN:-train-1.txt}"
if [[ -n "${ASPEC:-}" ]]; then SOURCE="aspec:$ASPEC:$ASPEC_TRAIN"; NAME_OF_DATA="$(basename "$ASPEC")"
elif [[ -n "${DATA:-}" ]]; then SOURCE="text:$DATA"; NAME_OF_DATA="$(basename "$DATA")"
else SOURCE=""; NAME_OF_DATA=""; fi
WORK="${WORK:-$REPO/runs/perspe/${NAME_OF_DATA:-none}}"

usage() { sed -n '2,36p' "$0" | sed 's/^# \{0,1\}//'; }
command -v fairseq-train >/dev/null || source "$REPO/scripts/setup.sh"
export PYTHONWARNINGS=ignore
heavy() { if [[ -n "${PERSPE_LOCK:-}" ]]; then flock "$PERSPE_LOCK" "$@"; else "$@"; fi; }
say() { echo "[perspe] $*" >&2; }
die() { echo "run.sh: $*" >&2; exit 1; }

# The settings a step's output depends on, checked against what made it before;
# one option and its values a line.
check_settings() {  # FILE WHAT WORDS...
  local file="$1" what="$2"; shift 2
  local want; want="$(printf '%s\n' "$@" | awk 'NR > 1 && /^--/ {print line; line = ""}
    {line = line (line == "" ? "" : " ") $0} END {print line}')"
  if [[ -f "$file" ]]; then
    if [[ "$(cat "$file")" != "$want" ]]; then
      echo "run.sh: $what was made with other settings:" >&2
      diff <(cat "$file") <(echo "$want") | grep '^[<>]' | sed 's/^</  before:/; s/^>/  now:   /' >&2 || true
      return 1
    fi
  else
    mkdir -p "$(dirname "$file")"; echo "$want" > "$file"
  fi
}

prepare() {
  [[ -n "$SOURCE" ]] || die "set ASPEC=DIR (ASPEC-JE) or DATA=DIR ({train,dev,test}.{en,ja}); see examples/perspe/README.md"
  check_settings "$WORK/prepare.settings" "$WORK" --source "$SOURCE" --vocab "$VOCAB" \
    --ja-segmented "$JA_SEGMENTED" \
    || die "use another WORK, or delete $WORK to prepare it again"
  mkdir -p "$WORK/raw" "$WORK/text" "$WORK/spm" "$WORK/chunks"
  local t0=$SECONDS split lang
  if [[ ! -f "$WORK/raw/.done" ]]; then
    if [[ "$SOURCE" == aspec:* ]]; then
      say "extracting ASPEC-JE ($ASPEC)"
      # shellcheck disable=SC2086  # a list of file names
      python "$HERE/aspec_to_text.py" --aspec "$ASPEC" --output "$WORK/raw" --train $ASPEC_TRAIN
    else
      for split in train dev test; do for lang in en ja; do
        [[ -f "$DATA/$split.$lang" ]] || die "$DATA/$split.$lang not found (see examples/perspe/README.md)"
        cp "$DATA/$split.$lang" "$WORK/raw/$split.$lang"
      done; done
    fi
    if [[ "$JA_SEGMENTED" == 1 ]]; then
      for split in train dev test; do sed -i 's/ //g' "$WORK/raw/$split.ja"; done
    elif head -1000 "$WORK/raw/train.ja" | awk '/[^ ] [^ ]/ {n++} END {exit !(NR > 0 && n > NR / 2)}'; then
      say "warning: most lines of train.ja have spaces between words; if the Japanese is" \
          "word-segmented (KyTea, MeCab), set JA_SEGMENTED=1"
    fi
    touch "$WORK/raw/.done"
  fi
  for split in train dev test; do
    [[ $(wc -l < "$WORK/raw/$split.en") == $(wc -l < "$WORK/raw/$split.ja") ]] \
      || die "$split.en and $split.ja differ in line count ($WORK/raw)"
  done

  # One normalisation (NFKC, control and format characters, spacing) of both
  # sides before anything else; SentencePiece then runs with its identity rule.
  if [[ ! -f "$WORK/text/.done" ]]; then
    say "normalising the raw text (scripts/data/normalize_text.py)"
    local ins=() outs=()
    for split in train dev test; do for lang in en ja; do
      ins+=("$WORK/raw/$split.$lang"); outs+=("$WORK/text/$split.$lang")
    done; done
    python "$REPO/scripts/data/normalize_text.py" -i "${ins[@]}" -o "${outs[@]}"
    touch "$WORK/text/.done"
  fi

  if [[ ! -f "$WORK/spm/joint.model" ]]; then
    say "joint SentencePiece model, at most $VOCAB pieces, on train.en + train.ja"
    python "$SPM_TOOL" train --input "$WORK/text/train.en" "$WORK/text/train.ja" \
      --model-prefix "$WORK/spm/joint" --vocab-size "$VOCAB" --character-coverage 0.9995 \
      --normalization-rule-name identity
  fi
  for split in train dev test; do for lang in en ja; do
    if [[ ! -f "$WORK/spm/$split.$lang" ]]; then
      python "$SPM_TOOL" encode --model "$WORK/spm/joint.model" \
        < "$WORK/text/$split.$lang" > "$WORK/spm/$split.$lang.part"
      mv "$WORK/spm/$split.$lang.part" "$WORK/spm/$split.$lang"
    fi
  done; done

  if [[ ! -f "$WORK/data-bin/.done" ]]; then
    say "fairseq-preprocess --joined-dictionary"
    rm -rf "$WORK/data-bin"
    fairseq-preprocess -s en -t ja --joined-dictionary --trainpref "$WORK/spm/train" \
      --validpref "$WORK/spm/dev" --testpref "$WORK/spm/test" --destdir "$WORK/data-bin" \
      --workers "$(nproc)" > "$WORK/preprocess.log" 2>&1 \
      || { tail -20 "$WORK/preprocess.log" >&2; die "fairseq-preprocess failed (log: $WORK/preprocess.log)"; }
    touch "$WORK/data-bin/.done"
  fi

  # Phrases of the Japanese side, projected onto its pieces (train and dev:
  # only training perturbs; test needs none).
  if [[ ! -f "$WORK/chunks/.done" ]]; then
    say "chunking train.ja and dev.ja (MeCab + nltk)"
    heavy python "$REPO/scripts/data/chunk_japanese.py" --workers "$(nproc)" \
      --input "$WORK/text/train.ja" "$WORK/text/dev.ja" \
      --output "$WORK/chunks/train.ja" "$WORK/chunks/dev.ja"
    touch "$WORK/chunks/.done"
  fi
  if [[ ! -f "$WORK/data-bin/valid.en-ja.ja.chunks.idx" ]]; then
    say "projecting the phrases onto the pieces"
    # a line that cannot be projected is named and gets one phrase per piece
    # (token-level offsets); one odd sentence never stops the whole corpus
    python "$REPO/scripts/data/project_chunks.py" --spm-model "$WORK/spm/joint.model" \
      --on-mismatch token --pieces "$WORK/spm/train.ja" "$WORK/spm/dev.ja" \
      --chunks "$WORK/chunks/train.ja" "$WORK/chunks/dev.ja" \
      --output "$WORK/data-bin/train.en-ja.ja.chunks" "$WORK/data-bin/valid.en-ja.ja.chunks"
  fi
  say "prepared $WORK/data-bin ($(( SECONDS - t0 )) s)"
}

train_seed() {  # NAME SEED OPTIONS...
  local name="$1" seed="$2"; shift 2
  local dir="$WORK/systems/$name/seed$seed"
  local args=("$WORK/data-bin" --user-dir "$REPO/fairseq_luong" --task translation_chunks
              -s en -t ja "${MODEL[@]}" --max-tokens "$MAX_TOKENS" --update-freq "$UPDATE_FREQ"
              --criterion perspe_label_smoothed_cross_entropy --label-smoothing 0.1
              --distributed-world-size "$GPUS" --max-update "$MAX_UPDATE" --seed "$seed" "$@")
  # what the seed's checkpoints depend on: the data and every option but the paths
  local data_id; data_id="$(cat "$WORK/prepare.settings" "$WORK/data-bin/dict.en.txt" | sha1sum | cut -c1-12)"
  local settings=(--data "$data_id" "${args[@]:3}") refused
  if ! refused="$(check_settings "$dir/settings" "$name seed $seed ($dir)" "${settings[@]}" 2>&1)"; then
    echo "$refused" >&2
    [[ "${RETRAIN:-0}" == 1 ]] \
      || die "refusing to resume $name seed $seed with other options: use another NAME, or RETRAIN=1 to delete it and train again"
    say "$name seed $seed: RETRAIN=1: deleting $dir and training it again"
    rm -rf "$dir"
    check_settings "$dir/settings" "" "${settings[@]}"
  fi
  if [[ -f "$dir/trained" ]]; then
    say "$name seed $seed: trained already ($MAX_UPDATE updates)"; return
  fi
  say "training $name seed $seed: ${*:-(arch defaults)}; $MAX_UPDATE updates of $BATCH tokens" \
      "(= --max-tokens $MAX_TOKENS x --update-freq $UPDATE_FREQ x $GPUS GPU(s)); log: $dir/train.log"
  heavy fairseq-train "${args[@]}" --save-dir "$dir/checkpoints" --no-epoch-checkpoints \
    --log-format simple --no-progress-bar 2>&1 | tee -a "$dir/train.log" \
    | python "$REPO/examples/common/recipe_tools.py" progress "$name seed $seed" \
    || { tail -30 "$dir/train.log" >&2; die "training $name seed $seed failed (log: $dir/train.log)"; }
  touch "$dir/trained"
}

train() {  # NAME OPTIONS...
  local name="$1" seed word; shift
  for word in "$@"; do
    case "$word" in
      --max-tokens*|--update-freq*|--seed*|--max-update*|--distributed-world-size*)
        die "$word: the batch, seeds and updates come from TABLE, GPUS, MAX_TOKENS, SEEDS and MAX_UPDATE (see run.sh --help)" ;;
    esac
  done
  [[ -f "$WORK/data-bin/.done" && -f "$WORK/data-bin/train.en-ja.ja.chunks.idx" ]] \
    || die "no prepared data in $WORK: run prepare first (with the same ASPEC/DATA/WORK)"
  for seed in $SEEDS; do train_seed "$name" "$seed" "$@"; done
}

evaluate_seed() {  # NAME SEED
  local name="$1" seed="$2" dir="$WORK/systems/$1/seed$2"
  local ckpt="$dir/checkpoints/checkpoint_last.pt"
  [[ -f "$ckpt" ]] || die "$name seed $seed has no checkpoint: run.sh train $name first"
  [[ -f "$dir/trained" ]] || say "warning: $name seed $seed has not finished training; scoring its last checkpoint"
  if [[ -f "$dir/bleu.json" && "$dir/bleu.json" -nt "$ckpt" ]]; then return; fi
  say "translating test with $name seed $seed (beam 5, $ckpt)"
  heavy fairseq-generate "$WORK/data-bin" --user-dir "$REPO/fairseq_luong" \
    --task translation_chunks -s en -t ja --gen-subset test --path "$ckpt" \
    --beam 5 --batch-size 128 --post-process sentencepiece \
    > "$dir/generate.part" 2> "$dir/generate.log" \
    || { tail -20 "$dir/generate.log" >&2; die "fairseq-generate failed (log: $dir/generate.log)"; }
  # fairseq's closing "BLEU4 = ..." compares unsegmented Japanese word by word
  # (one "word" a sentence) against its own T- lines: meaningless here, dropped
  grep -v '^Generate test with beam=' "$dir/generate.part" > "$dir/generate.out"
  rm -f "$dir/generate.part"
  grep '^H-' "$dir/generate.out" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "$dir/test.hyp"
  python "$HERE/score.py" score --hyp "$dir/test.hyp" --ref "$WORK/raw/test.ja" --json "$dir/bleu.json"
}

evaluate() {  # NAME
  local name="$1" seed
  for seed in $SEEDS; do evaluate_seed "$name" "$seed"; done
  python "$HERE/score.py" table --work "$WORK" "$name"
}

cmd="${1:-}"; [[ $# -gt 0 ]] && shift
case "$cmd" in
  prepare) prepare ;;
  train)
    [[ $# -ge 1 ]] || { usage; exit 2; }
    name="$1"; shift; [[ "${1:-}" == -- ]] && shift
    train "$name" "$@" ;;
  eval) [[ $# -eq 1 ]] || { usage; exit 2; }; evaluate "$1" ;;
  table) [[ $# -ge 1 ]] || { usage; exit 2; }; python "$HERE/score.py" table --work "$WORK" "$@" ;;
  all)
    prepare
    train spe_spe --encoder-pos spe --decoder-pos spe
    train spe_perspe --encoder-pos spe --decoder-pos perspe --perturb-range 1 --perturb-unit phrase
    for seed in $SEEDS; do evaluate_seed spe_spe "$seed"; evaluate_seed spe_perspe "$seed"; done
    python "$HERE/score.py" table --work "$WORK" spe_spe spe_perspe ;;
  -h|--help) usage ;;
  *) usage; exit 2 ;;
esac
