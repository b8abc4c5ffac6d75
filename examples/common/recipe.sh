# Shell functions the recipes in examples/ share. A recipe sets RECIPE (a short name
# printed before messages), REPO (the checkout) and its defaults, sources this file,
# calls `parse_options "$@"` with OPTS mapping its flags to variables, then
# `recipe_init` (which needs WORK, the recipe's work folder).
#
# Caching: every output a step makes has a key (the options and inputs it was made
# from). A step whose output exists with the same key is skipped; an output with
# another key is made again (cheap steps) or refused (training, preparation:
# use another name or delete the folder). Training resumes from checkpoint_last.pt
# after an interruption, with the same budget (fairseq counts the time already
# spent, --stop-time-hours included).

TOOLS="$REPO/examples/common/recipe_tools.py"

# parse_options "$@": each --flag VALUE sets the variable OPTS[--flag] names; the other
# words go to POS, everything after -- to EXTRA; -h/--help calls the recipe's usage
parse_options() {
  POS=() EXTRA=()
  while [[ $# -gt 0 ]]; do
    case "$1" in
      --) shift; EXTRA=("$@"); return ;;
      -h|--help) usage; exit 0 ;;
      -*)
        [[ -n "${OPTS[$1]:-}" ]] || { echo "run.sh: unknown option $1 (see --help)" >&2; exit 2; }
        [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a value" >&2; exit 2; }
        printf -v "${OPTS[$1]}" '%s' "$2"; shift 2 ;;
      *) POS+=("$1"); shift ;;
    esac
  done
}

# check_number FLAG VALUE KIND WHAT: stop (status 2, one line) unless VALUE is of KIND:
# positive (a number > 0, such as 1.5), count (a whole number >= 1) or integer (>= 0);
# WHAT says what the option gives. Recipes check their options before doing anything.
check_number() {
  local flag="$1" value="$2" kind="$3" what="$4" ok=0
  case "$kind" in
    positive) [[ "$value" =~ ^[0-9]*\.?[0-9]+$ && ! "$value" =~ ^0*\.?0*$ ]] && ok=1
              kind="a positive number such as 1.5" ;;
    count) [[ "$value" =~ ^[0-9]+$ && ! "$value" =~ ^0+$ ]] && ok=1; kind="a whole number of at least 1" ;;
    integer) [[ "$value" =~ ^[0-9]+$ ]] && ok=1; kind="a non-negative integer" ;;
  esac
  (( ok )) || { echo "run.sh: $flag $value: give $what, $kind" >&2; exit 2; }
}

# recipe_init: the environment (scripts/setup.sh unless fairseq is on PATH), BIN
recipe_init() {
  command -v fairseq-train >/dev/null || source "$REPO/scripts/setup.sh" >&2
  export PYTHONWARNINGS=ignore OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
  BIN="$WORK/data-bin"
}

say() { echo "[$RECIPE] $*" >&2; }
die() { echo "[$RECIPE] error: $*" >&2; exit 1; }

# prepared: stop unless WORK/data-bin was made with the options WORK/prepared.options records
prepared() { fresh "$BIN/.done" "$(cat "$WORK/prepared.options" 2>/dev/null)" || die "run prepare first ($BIN)"; }

# need_file PATH WHERE: stop with a message saying where to get PATH
need_file() { [[ -s "$1" ]] || die "$1 not found or empty: $2"; }

# key_of ARGS...: the cache key of a command line (one line, stable)
key_of() { printf '%q ' "$@"; }

# fresh OUT KEY: true when OUT exists and was made with KEY
fresh() { [[ -e "$1" && -f "$1.key" && "$(cat "$1.key")" == "$2" ]]; }
# stamp OUT KEY: record that OUT was made with KEY
stamp() { printf '%s\n' "$2" > "$1.key"; }

# same_or_refuse FILE KEY WHAT: FILE holds KEY (or is new: then it gets it);
# another key stops with the difference shown
same_or_refuse() {
  local file="$1" key="$2" what="$3"
  if [[ -f "$file" && "$(cat "$file")" != "$key" ]]; then
    echo "[$RECIPE] error: $what was made with other options:" >&2
    diff <(sed 's/ --/\n--/g' "$file") <(printf '%s\n' "$key" | sed 's/ --/\n--/g') | grep '^[<>]' \
      | sed 's/^</  before:/; s/^>/  now:   /' >&2 || true
    die "delete $(dirname "$file") to redo it, or use another name / --work-dir"
  fi
  mkdir -p "$(dirname "$file")"
  printf '%s\n' "$key" > "$file"
}

# data_key FILES...: sizes and modification times of the input files
data_key() { stat -c '%n %s %Y' "$@" | tr '\n' ' '; }

# train_system NAME DATA_BIN DATA_KEY FAIRSEQ_TRAIN_ARGS...
#   trains WORK/systems/NAME (checkpoints in .../checkpoints, log in .../train.log);
#   skips it when trained with the same options, resumes it when interrupted,
#   refuses when the folder holds a system trained with other options.
train_system() {
  local name="$1" bin="$2" dkey="$3"; shift 3
  local dir="$WORK/systems/$name"
  local key; key="$(key_of "$@") data: $dkey"
  same_or_refuse "$dir/options" "$key" "system $name ($dir)"
  if fresh "$dir/trained" "$key"; then say "$name: trained already ($dir)"; return; fi
  if [[ -f "$dir/checkpoints/checkpoint_last.pt" ]]; then
    say "$name: resuming from $dir/checkpoints/checkpoint_last.pt"
  fi
  say "training $name (log: $dir/train.log)"
  say "  fairseq-train $bin $*"
  echo "== $(date -u '+%F %T') fairseq-train $bin $*" >> "$dir/train.log"
  if ! fairseq-train "$bin" --user-dir "$REPO/fairseq_luong" --save-dir "$dir/checkpoints" \
        --log-format simple --no-progress-bar "$@" 2>&1 \
      | tee -a "$dir/train.log" | python "$TOOLS" progress "$name"; then
    tail -20 "$dir/train.log" >&2
    die "fairseq-train failed for $name (log: $dir/train.log)"
  fi
  grep -q "done training" "$dir/train.log" || die "$name: fairseq-train ended without 'done training' ($dir/train.log)"
  touch "$dir/trained"; stamp "$dir/trained" "$key"
}

# average_last NAME N: WORK/systems/NAME/model.pt = the average of the last N saved
# states: the interval checkpoints (checkpoint_E_U.pt) and, when training went on after
# the newest of them (a time budget ends between two saves), checkpoint_last.pt, the final
# state, in place of the oldest; fewer when fewer exist; checkpoint_last.pt alone when N is 1
average_last() {
  local name="$1" n="$2" dir="$WORK/systems/$1"
  local ckpts=("$dir"/checkpoints/checkpoint_*_*.pt)
  [[ -e "${ckpts[0]}" ]] || ckpts=()
  local key; key="$(cat "$dir/trained.key") average $n final"
  fresh "$dir/model.pt" "$key" && return
  [[ -f "$dir/checkpoints/checkpoint_last.pt" ]] || die "$name: no checkpoint in $dir/checkpoints: train it first"
  # "UPDATES PATH" of each interval checkpoint, oldest first
  local c u states=() newest=0 final
  for c in "${ckpts[@]}"; do u="${c##*_}"; u="${u%.pt}"; states+=("$u $c"); (( u > newest )) && newest=$u; done
  final=$(grep -o "num_updates [0-9]*" "$dir/train.log" 2>/dev/null | tail -1 | cut -d' ' -f2)
  mapfile -t states < <(printf '%s\n' "${states[@]+"${states[@]}"}" | sed '/^$/d' | sort -n | cut -d' ' -f2-)
  (( ${final:-0} > newest )) && states+=("$dir/checkpoints/checkpoint_last.pt")
  if (( n > 1 && ${#states[@]} > 1 )); then
    (( n > ${#states[@]} )) && n=${#states[@]}
    python "$REPO/scripts/train/average_checkpoints.py" --inputs "${states[@]: -$n}" --output "$dir/model.pt"
  else
    cp "$dir/checkpoints/checkpoint_last.pt" "$dir/model.pt"
  fi
  stamp "$dir/model.pt" "$key"
}

# validate NAME DATA_BIN [fairseq-validate args]: WORK/systems/NAME/valid.json,
# the validation loss and perplexity of model.pt
validate_model() {
  local name="$1" bin="$2" dir="$WORK/systems/$1"; shift 2
  local key; key="$(cat "$dir/model.pt.key") $(key_of "$@")"
  fresh "$dir/valid.json" "$key" && return
  fairseq-validate "$bin" --user-dir "$REPO/fairseq_luong" --task translation --path "$dir/model.pt" \
    --valid-subset valid --log-format simple "$@" > "$dir/validate.log" 2>&1 \
    || { tail -20 "$dir/validate.log" >&2; die "fairseq-validate failed for $name"; }
  python "$TOOLS" valid-json "$dir/validate.log" > "$dir/valid.json"
  stamp "$dir/valid.json" "$key"
}

# translate LABEL DATA_BIN CKPTS REF OUT_PREFIX [fairseq-generate args]: OUT_PREFIX.out
# (fairseq-generate's output) and OUT_PREFIX.hyp (the hypotheses in test order, one for
# each line of REF). CKPTS: checkpoint(s) separated by ':' (an ensemble), each made by
# a step that left CKPT.key; the args and the files they name key the output
translate() {
  local label="$1" bin="$2" ckpts="$3" ref="$4" out="$5"; shift 5
  local key="" ckpt
  for ckpt in ${ckpts//:/ }; do key+="$(cat "$ckpt.key") "; done
  key+="$(key_of "$@")"
  local arg; for arg in "$@"; do [[ -f "$arg" ]] && key+=" $(data_key "$arg")"; done  # e.g. a --replace-unk DICT
  fresh "$out.hyp" "$key" && return
  say "$label: translating ($*)"
  fairseq-generate "$bin" --user-dir "$REPO/fairseq_luong" --path "$ckpts" "$@" \
    > "$out.out" 2> "$out.log" || { tail -20 "$out.log" >&2; die "fairseq-generate failed for $label ($out.log)"; }
  python "$TOOLS" hyps "$out.out" --ref "$ref" > "$out.hyp"
  stamp "$out.hyp" "$key"
}

# report WHAT OUT CMD...: CMD's table (stdout without its "plot:" line and the blank lines
# at the end) to OUT.md and the terminal, its stderr to OUT.log
report() {
  local what="$1" out="$2"; shift 2
  "$@" 2> "$out.log" | grep -v '^plot: ' | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' > "$out.md" \
    || { tail -5 "$out.log" >&2; die "$what failed ($out.log)"; }
  cat "$out.md"
}

# score HYP REF OUT_JSON [sacrebleu args]: sacreBLEU of HYP against the raw reference REF
score() {
  local hyp="$1" ref="$2" out="$3"; shift 3
  local key; key="$(data_key "$hyp" "$ref") $(key_of "$@")"
  if ! fresh "$out" "$key"; then
    sacrebleu "$ref" -i "$hyp" -m bleu -w 2 "$@" > "$out" || die "sacrebleu failed on $hyp"
    stamp "$out" "$key"
  fi
  python -c "import json,sys; s=json.load(open(sys.argv[1])); print(f\"{s['score']:.2f}  {s['verbose_score']}  {s['signature']}\")" "$out"
}
