#!/usr/bin/env bash
# perSPE (Oka, Tanaka & Nagata, NLP2022) on English->Japanese with fairseq_luong.
#
#   bash examples/perspe/run.sh prepare              # SentencePiece, binarize, chunk, project
#   bash examples/perspe/run.sh train NAME [-- fairseq-train options]
#   bash examples/perspe/run.sh eval NAME            # translate test, sacreBLEU -tok ja-mecab
#   bash examples/perspe/run.sh all                  # prepare; train and eval spe_spe, spe_perspe
#
# Settings (environment variables):
#   DATA          folder with {train,dev,test}.{en,ja}, one sentence a line
#                 (default: ../shared/data/small_parallel_enja beside the checkout)
#   JA_SEGMENTED  1 if the Japanese has spaces between words, as in small_parallel_enja
#                 (they are removed); 0 for raw Japanese such as ASPEC (default: 1)
#   PRESET        small: a 2+2-layer, 128-dim model that trains in minutes on a CPU;
#                 base: Vaswani et al.'s base sizes, for a GPU and ASPEC (default: small)
#   WORK          where everything goes (default: runs/perspe/<name of DATA> in the checkout)
#   VOCAB         SentencePiece vocabulary per language (default: 4000 small, 16000 base)
#   MAX_UPDATE    training budget in updates (default: 1600 small, 100000 base)
#   SEED          (default: 1)
#   PERSPE_LOCK   if set, training and translation run under `flock $PERSPE_LOCK`
#
# NAME is a folder under $WORK/systems; options after -- choose the system, e.g.
#   run.sh train spe_perspe -- --encoder-pos spe --decoder-pos perspe --perturb-range 1
# Every step is resumable: finished steps are skipped, training continues from
# checkpoint_last.pt. Delete a step's output to redo it.
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"

DATA="${DATA:-$REPO/../shared/data/small_parallel_enja}"
JA_SEGMENTED="${JA_SEGMENTED:-1}"
PRESET="${PRESET:-small}"
WORK="${WORK:-$REPO/runs/perspe/$(basename "$DATA")}"
SEED="${SEED:-1}"
case "$PRESET" in
  small) VOCAB="${VOCAB:-4000}" MAX_UPDATE="${MAX_UPDATE:-1600}"
         MODEL=(--arch transformer_perspe --encoder-layers 2 --decoder-layers 2
                --encoder-embed-dim 128 --encoder-ffn-embed-dim 512
                --encoder-attention-heads 4 --decoder-attention-heads 4
                --share-decoder-input-output-embed --dropout 0.1
                --lr 0.002 --warmup-updates 400 --max-tokens 2048) ;;
  base)  VOCAB="${VOCAB:-16000}" MAX_UPDATE="${MAX_UPDATE:-100000}"
         MODEL=(--arch transformer_perspe --share-decoder-input-output-embed --dropout 0.1
                --lr 0.0007 --warmup-updates 4000 --max-tokens 4096 --update-freq 8) ;;
  *) echo "run.sh: PRESET must be small or base, not $PRESET" >&2; exit 2 ;;
esac
usage() { sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; }

command -v fairseq-train >/dev/null || source "$REPO/scripts/setup.sh"
export PYTHONWARNINGS=ignore
heavy() { if [[ -n "${PERSPE_LOCK:-}" ]]; then flock "$PERSPE_LOCK" "$@"; else "$@"; fi; }
say() { echo "[perspe] $*" >&2; }

prepare() {
  mkdir -p "$WORK/raw" "$WORK/spm" "$WORK/chunks"
  local split lang
  for split in train dev test; do
    for lang in en ja; do
      [[ -f "$DATA/$split.$lang" ]] || { echo "run.sh: $DATA/$split.$lang not found (see examples/perspe/README.md)" >&2; exit 1; }
      if [[ ! -f "$WORK/raw/$split.$lang" ]]; then
        if [[ "$lang" == ja && "$JA_SEGMENTED" == 1 ]]; then
          sed 's/ //g' "$DATA/$split.$lang" > "$WORK/raw/$split.$lang.part"
        else
          cp "$DATA/$split.$lang" "$WORK/raw/$split.$lang.part"
        fi
        mv "$WORK/raw/$split.$lang.part" "$WORK/raw/$split.$lang"
      fi
    done
    [[ $(wc -l < "$WORK/raw/$split.en") == $(wc -l < "$WORK/raw/$split.ja") ]] \
      || { echo "run.sh: $DATA/$split.en and $split.ja differ in line count" >&2; exit 1; }
  done

  for lang in en ja; do
    if [[ ! -f "$WORK/spm/$lang.model" ]]; then
      say "SentencePiece $lang ($VOCAB pieces)"
      local coverage=1.0; [[ "$lang" == ja ]] && coverage=0.9995
      python "$REPO/examples/common/spm_tool.py" train --input "$WORK/raw/train.$lang" \
        --model-prefix "$WORK/spm/$lang" --vocab-size "$VOCAB" --character-coverage "$coverage"
    fi
    for split in train dev test; do
      if [[ ! -f "$WORK/spm/$split.$lang" ]]; then
        python "$REPO/examples/common/spm_tool.py" encode --model "$WORK/spm/$lang.model" \
          < "$WORK/raw/$split.$lang" > "$WORK/spm/$split.$lang.part"
        mv "$WORK/spm/$split.$lang.part" "$WORK/spm/$split.$lang"
      fi
    done
  done

  if [[ ! -f "$WORK/data-bin/.done" ]]; then
    say "fairseq-preprocess"
    rm -rf "$WORK/data-bin"
    fairseq-preprocess -s en -t ja --trainpref "$WORK/spm/train" --validpref "$WORK/spm/dev" \
      --testpref "$WORK/spm/test" --destdir "$WORK/data-bin" --workers "$(nproc)" \
      > "$WORK/preprocess.log" 2>&1 || { tail -20 "$WORK/preprocess.log" >&2; exit 1; }
    touch "$WORK/data-bin/.done"
  fi

  # Phrases of the Japanese side, projected onto its pieces (train and dev:
  # only training perturbs; test needs none).
  local name
  for split in train dev; do
    if [[ ! -f "$WORK/chunks/$split.ja" ]]; then
      say "chunking $split.ja (MeCab + nltk)"
      heavy python "$REPO/scripts/chunk_japanese.py" --input "$WORK/raw/$split.ja" \
        --output "$WORK/chunks/$split.ja" --workers "$(nproc)"
    fi
    name=$split; [[ "$split" == dev ]] && name=valid
    if [[ ! -f "$WORK/data-bin/$name.en-ja.ja.chunks.idx" ]]; then
      python "$REPO/scripts/project_chunks.py" --pieces "$WORK/spm/$split.ja" \
        --chunks "$WORK/chunks/$split.ja" --spm-model "$WORK/spm/ja.model" \
        --output "$WORK/data-bin/$name.en-ja.ja.chunks"
    fi
  done
}

train() {
  local name="$1"; shift
  local dir="$WORK/systems/$name"
  # fairseq-train restarted at --max-update would still do one more update
  if [[ "$(cat "$dir/trained_updates" 2>/dev/null)" == "$MAX_UPDATE" ]]; then
    say "$name: trained for $MAX_UPDATE updates already"; return
  fi
  mkdir -p "$dir"
  say "training $name: ${*:-(arch defaults)} for $MAX_UPDATE updates (log: $dir/train.log)"
  heavy fairseq-train "$WORK/data-bin" --user-dir "$REPO/fairseq_luong" \
    --task translation_chunks -s en -t ja "${MODEL[@]}" \
    --criterion perspe_label_smoothed_cross_entropy --label-smoothing 0.1 \
    --optimizer adam --adam-betas '(0.9, 0.98)' --clip-norm 0.0 \
    --lr-scheduler inverse_sqrt --max-update "$MAX_UPDATE" --seed "$SEED" \
    --save-dir "$dir/checkpoints" --no-epoch-checkpoints --save-interval-updates 1000 \
    --keep-interval-updates 1 --log-format simple --log-interval 100 --no-progress-bar \
    "$@" >> "$dir/train.log" 2>&1 || { tail -30 "$dir/train.log" >&2; exit 1; }
  echo "$MAX_UPDATE" > "$dir/trained_updates"
  grep -E "\| valid on 'valid'" "$dir/train.log" | tail -1 >&2 || true
}

evaluate() {
  local name="$1" dir="$WORK/systems/$1"
  if [[ -f "$dir/bleu.txt" ]]; then cat "$dir/bleu.txt"; return; fi
  [[ -f "$dir/checkpoints/checkpoint_last.pt" ]] || { echo "run.sh: train $name first" >&2; exit 1; }
  say "translating test with $name (beam 5)"
  heavy fairseq-generate "$WORK/data-bin" --user-dir "$REPO/fairseq_luong" \
    --task translation_chunks -s en -t ja --gen-subset test \
    --path "$dir/checkpoints/checkpoint_last.pt" --beam 5 --batch-size 128 \
    --post-process sentencepiece > "$dir/generate.out" 2> "$dir/generate.log" \
    || { tail -20 "$dir/generate.log" >&2; exit 1; }
  grep '^H-' "$dir/generate.out" | sed 's/^H-//' | sort -n -k1,1 | cut -f3 > "$dir/test.hyp"
  sacrebleu "$WORK/raw/test.ja" -i "$dir/test.hyp" -tok ja-mecab -m bleu chrf -w 2 \
    > "$dir/bleu.json"
  python - "$dir/bleu.json" "$name" > "$dir/bleu.txt" <<'PY'
import json, sys
scores = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]}\t" + "\t".join(f"{s['name']} {s['score']}" for s in scores)
      + f"\t{scores[0]['signature']}")
PY
  cat "$dir/bleu.txt"
}

cmd="${1:-}"; [[ $# -gt 0 ]] && shift
case "$cmd" in
  prepare) prepare ;;
  train)
    [[ $# -ge 1 ]] || { usage; exit 2; }
    name="$1"; shift; [[ "${1:-}" == -- ]] && shift
    train "$name" "$@" ;;
  eval) [[ $# -eq 1 ]] || { usage; exit 2; }; evaluate "$1" ;;
  all)
    prepare
    train spe_spe --encoder-pos spe --decoder-pos spe
    train spe_perspe --encoder-pos spe --decoder-pos perspe --perturb-range 1 --perturb-unit phrase
    evaluate spe_spe; evaluate spe_perspe ;;
  -h|--help) usage ;;
  *) usage; exit 2 ;;
esac
