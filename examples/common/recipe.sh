# Shell functions the recipes in examples/ share. A recipe sets RECIPE (a short name
# printed before messages), REPO (the checkout) and its defaults, sources this file,
# calls `parse_options "$@"` with OPTS mapping its flags to variables, then
# `recipe_init` (which needs WORK, the recipe's work folder).
#
# Freshness, one rule for every derived file (data, model, translation, score, table):
# a derived file OUT is made from a KEY, the text of everything it depends on: its
# inputs (by identity: the content hash of a derived input, path, size and content hash
# of raw ones),
# its options, and the version of the code that makes it (code_version: a hash of the
# checkout's files that the step's programs run, see examples/common/code_version.py;
# documentation, tests and the recipes' own shell text are not code of any step, so a
# README-only commit changes no key). `stamp OUT KEY` writes OUT.key: KEY, then what OUT
# is (its content hash, its id) and the sizes and times of its files. OUT is fresh when
# its recorded KEY equals the KEY computed now and its files are unchanged since it was
# stamped: the same sizes and times, or the same content (a copy); a partial deletion or
# an edit makes it stale. The rule is Python: examples/common/freshness.py. A step whose output is fresh
# is skipped; a stale output is made again when that is cheap (data, translations,
# scores) and refused when it is not (training: the difference is shown; RETRAIN=1 or
# deleting the folder trains it again, ACCEPT_CODE=1 keeps a model across a code
# change and records that you did; a larger --max-epoch or --stop-time-hours is taken and the
# training goes on: same_or_raise). Identities chain: a retrained model has another id,
# so every translation and score made from the old one is stale; tables print fresh
# results only and say what is missing or stale. Training resumes from
# checkpoint_last.pt after an interruption, with the same budget (fairseq counts the
# time already spent, --stop-time-hours included).

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

# recipe_init: the environment (scripts/setup.sh unless fairseq is on PATH), BIN, the
# code versions of the shared steps
recipe_init() {
  command -v fairseq-train >/dev/null || source "$REPO/scripts/setup.sh" >&2
  export PYTHONWARNINGS=ignore OMP_NUM_THREADS="${OMP_NUM_THREADS:-$(nproc)}"
  BIN="$WORK/data-bin"
  export FAIRSEQ_LUONG_HASH_CACHE="${FAIRSEQ_LUONG_HASH_CACHE:-$WORK/.input_hashes}"  # data_key's
  warm_code_versions
}

say() { echo "[$RECIPE] $*" >&2; }
die() { echo "[$RECIPE] error: $*" >&2; exit 1; }

# prepared: stop unless WORK/data-bin was made with the options WORK/prepared.options records
prepared() { fresh "$BIN/.done" "$(cat "$WORK/prepared.options" 2>/dev/null)" || die "run prepare first ($BIN)"; }

# need_file PATH WHERE: stop with a message saying where to get PATH
need_file() { [[ -s "$1" ]] || die "$1 not found or empty: $2"; }

# key_of ARGS...: the cache key of a command line (one line, stable)
key_of() { printf '%q ' "$@"; }

# --------------------------------------------------------------------------- freshness
# The rule is examples/common/freshness.py (its docstring says it whole, its tests
# run in milliseconds); these functions are its command line, KEY passed on stdin. It needs
# the standard library only: -S skips site-packages at start-up (a recipe runs it hundreds
# of times: 38 ms a call instead of 57, measured beside two trainings on the 2-core machine)
FRESHNESS=(python -S "$REPO/examples/common/freshness.py")

# stamp OUT KEY [PATH...]: record that OUT was made from KEY, and what it is (the paths it
# covers, default OUT itself or the folder of a marker DIR/.done; their content hash, id;
# their names, sizes and times, stat)
stamp() { local out="$1" key="$2"; shift 2; printf '%s' "$key" | "${FRESHNESS[@]}" stamp "$out" "$@"; }
# fresh OUT KEY: true when OUT was stamped with KEY and its files have not changed since
# (an OUT without OUT.key is never fresh: freshness.fresh's first test, here without a process)
fresh() { [[ -e "$1" && -f "$1.key" ]] || return 1; printf '%s' "$2" | "${FRESHNESS[@]}" fresh "$1"; }
# stale_reason OUT KEY: "missing", "made with other options" (or other data, input, code
# NAME, ...: from the first key line that differs), "changed since it was made", "fresh"
stale_reason() {
  if [[ -e "$1" && -f "$1.key" ]]; then printf '%s' "$2" | "${FRESHNESS[@]}" stale-reason "$1"; else echo missing; fi
}
# recorded OUT: the KEY OUT.key records
recorded() { "${FRESHNESS[@]}" recorded "$1"; }
# ident FILE: what FILE is, for the keys of what is made from it: FILE#ID, the id its stamp
# recorded (a derived file), else the hash of its content (a raw input)
ident() { if [[ -n "${_IDENTS[$1]+set}" ]]; then echo "${_IDENTS[$1]}"; else "${FRESHNESS[@]}" ident "$1"; fi; }
# remember_idents FILE...: ident each FILE that exists, all in one process, and keep them in this
# shell for the $(...) below it (a step's keys are computed there, where no cache survives):
# only for a step that writes none of them (table), which calls ident on each file many times
declare -A _IDENTS=()
remember_idents() {
  local f line have=()
  for f in "$@"; do [[ -f "$f" ]] && have+=("$f"); done
  (( ${#have[@]} )) || return 0
  while IFS= read -r line; do _IDENTS["${line%#*}"]="$line"; done < <("${FRESHNESS[@]}" ident "${have[@]}")
}
# data_key FILES...: raw input files by what they are: path, size and content hash of each
data_key() { "${FRESHNESS[@]}" data-key "$@" || die "cannot key the input files $*"; }

# code_version NAME ROOT... [--dist DIST...]: the key line "code NAME HASH", the version
# of the code ROOTs run (examples/common/code_version.py: the checkout's files they
# import, the data files beside them, the installed versions of DISTs); cached per run
declare -A _CODE_VERSIONS=()
code_version() {
  local name="$1"; shift
  local k; k="$(key_of "$@")"
  [[ -n "${_CODE_VERSIONS[$k]:-}" ]] \
    || _CODE_VERSIONS[$k]="$(python "$REPO/examples/common/code_version.py" hash "$@")" \
    || die "code_version.py failed for $name"
  echo "code $name ${_CODE_VERSIONS[$k]}"
}
# The code of the steps every recipe shares (code_version's arguments)
FAIRSEQ_DISTS=(--dist ve-fairseq fairseq torch)
CODE_TRAIN=("$REPO/fairseq_luong" "${FAIRSEQ_DISTS[@]}")
CODE_GENERATE=("$REPO/fairseq_luong" "$TOOLS" "${FAIRSEQ_DISTS[@]}")
CODE_SCORE=(--dist sacrebleu)
CODE_AVERAGE=("$REPO/scripts/train/average_checkpoints.py")
code_train() { code_version train "${CODE_TRAIN[@]}"; }
code_generate() { code_version generate "${CODE_GENERATE[@]}"; }
code_score() { code_version score "${CODE_SCORE[@]}"; }
# warm_code_versions: the shared code versions, computed once in this shell (keys are mostly
# computed inside $(...), where the cache would be lost), all four in one code_version.py process
warm_code_versions() {
  local keys=() hashes=() i
  keys=("$(key_of "${CODE_TRAIN[@]}")" "$(key_of "${CODE_GENERATE[@]}")" "$(key_of "${CODE_SCORE[@]}")"
        "$(key_of "${CODE_AVERAGE[@]}")")
  mapfile -t hashes < <(printf '%s\n' "${keys[@]}" | python "$REPO/examples/common/code_version.py" hashes)
  (( ${#hashes[@]} == ${#keys[@]} )) || die "code_version.py failed for the shared steps"
  for i in "${!keys[@]}"; do _CODE_VERSIONS[${keys[i]}]="${hashes[i]}"; done
}

# same_or_refuse FILE KEY WHAT [HOW]: FILE holds KEY (or is new: then it gets it);
# another key stops with the options that differ shown, and HOW to go on
same_or_refuse() { _same_or_refuse "" "$@"; }
# same_or_raise FILE KEY WHAT [HOW]: same_or_refuse for a training's options, which also takes a
# KEY that only raises --max-epoch or --stop-time-hours (freshness.py BOUNDS): the training
# then goes on from checkpoint_last.pt as the one that had the larger bound from the start
same_or_raise() { _same_or_refuse --bounds "$@"; }
_same_or_refuse() {
  local bounds="$1" file="$2" key="$3" what="$4" how="${5:-delete $(dirname "$2") to redo it, or use another name / --work-dir}"
  local why
  if ! why="$(printf '%s' "$key" | "${FRESHNESS[@]}" same-or-refuse "$file" "$what" ${bounds:+"$bounds"})"; then
    echo "[$RECIPE] error: $why" >&2
    die "$how"
  fi
  [[ -z "$why" ]] || say "$what: $why: it trains on from its last checkpoint"
}

# same_code_or_refuse DIR WHAT ROOT... [--dist DIST...]: the model in DIR (its checkpoints)
# was trained by the code ROOTs are now (DIR/code, DIR/code.manifest); a model trained by
# other code (or before the code version was recorded) is refused with the files that
# changed, unless ACCEPT_CODE=1, which records the change in DIR/code.accepted and goes on
same_code_or_refuse() {
  local dir="$1" what="$2"; shift 2
  local now; now="$(code_version train "$@")"
  if [[ -f "$dir/code" && "$(cat "$dir/code")" == "$now" ]]; then return 0; fi
  if [[ -f "$dir/code" || -e "$dir/checkpoints/checkpoint_last.pt" ]]; then
    local before; before="$(cat "$dir/code" 2>/dev/null || echo "not recorded (made before recipes recorded it)")"
    if [[ "${ACCEPT_CODE:-0}" != 1 ]]; then
      echo "[$RECIPE] error: $what was trained by other code: $before, now ${now#code train }; changed:" >&2
      python "$REPO/examples/common/code_version.py" diff "$dir/code.manifest" "$@" | sed 's/^/  /' >&2
      die "train it again (RETRAIN=1, or delete $dir), or keep it with ACCEPT_CODE=1 (recorded in $dir/code.accepted)"
    fi
    say "$what: ACCEPT_CODE=1: keeping it across the code change ($before -> ${now#code train }; $dir/code.accepted)"
    { echo "$(date -u '+%F %T') accepted: $before -> $now; changed:"
      python "$REPO/examples/common/code_version.py" diff "$dir/code.manifest" "$@" | sed 's/^/  /'; } >> "$dir/code.accepted"
  fi
  mkdir -p "$dir"
  printf '%s\n' "$now" > "$dir/code"
  python "$REPO/examples/common/code_version.py" hash "$@" --manifest "$dir/code.manifest" > /dev/null
}

# train_key DATA_KEY FAIRSEQ_TRAIN_ARGS...: the key of a training (its `trained` marker)
train_key() { local dkey="$1"; shift; printf 'options %s\ndata %s\n%s' "$(key_of "$@")" "$dkey" "$(code_train)"; }

# train_launcher N: TRAIN_LAUNCHER=(what starts fairseq-train for N processes): nothing for
# one; for several, torchrun (one process per GPU with nccl, or per CPU core group with gloo
# where there is no GPU: the same command, so a CPU run rehearses a multi-GPU one)
TRAIN_LAUNCHER=()
train_launcher() {
  TRAIN_LAUNCHER=()
  (( $1 > 1 )) && TRAIN_LAUNCHER=(torchrun --standalone --nproc_per_node "$1" --no-python)
  return 0
}

# train_system NAME DATA_BIN DATA_KEY FAIRSEQ_TRAIN_ARGS...
#   trains WORK/systems/NAME (checkpoints in .../checkpoints, log in .../train.log);
#   skips it when trained with the same options and code, resumes it when interrupted or
#   when only its --max-epoch / --stop-time-hours was raised (same_or_raise), refuses
#   when the folder holds a system trained with other options or other code
#   (same_code_or_refuse); RETRAIN=1 deletes it and trains it again.
train_system() {
  local name="$1" bin="$2" dkey="$3"; shift 3
  local dir="$WORK/systems/$name"
  local okey="$(key_of "$@") data: $dkey" key; key="$(train_key "$dkey" "$@")"
  if [[ "${RETRAIN:-0}" == 1 && -d "$dir" ]] && ! fresh "$dir/trained" "$key"; then
    say "$name: RETRAIN=1: deleting $dir and training it again"; rm -rf "$dir"
  fi
  same_or_raise "$dir/options" "$okey" "system $name ($dir)" \
    "train it again with RETRAIN=1 (or delete $dir), or use another name / --work-dir"
  same_code_or_refuse "$dir" "system $name ($dir)" "$REPO/fairseq_luong" "${FAIRSEQ_DISTS[@]}"
  if fresh "$dir/trained" "$key"; then say "$name: trained already ($dir)"; return; fi
  if [[ -f "$dir/trained" && "${ACCEPT_CODE:-0}" == 1 ]] && grep -q "done training" "$dir/train.log" 2>/dev/null; then
    stamp "$dir/trained" "$key" "$dir/checkpoints"; say "$name: trained already ($dir; code change accepted)"; return
  fi
  rm -f "$dir/trained" "$dir/trained.key"
  if [[ -f "$dir/checkpoints/checkpoint_last.pt" ]]; then
    say "$name: resuming from $dir/checkpoints/checkpoint_last.pt"
  fi
  say "training $name (log: $dir/train.log)"
  say "  fairseq-train $bin $*"
  echo "== $(date -u '+%F %T') fairseq-train $bin $*" >> "$dir/train.log"
  # each start names its machine (a training is reproducible bit for bit only on one kind of CPU)
  echo "== $(date -u '+%F %T') machine: $(python "$REPO/scripts/bench/machine.py")" >> "$dir/train.log"
  if ! "${TRAIN_LAUNCHER[@]+"${TRAIN_LAUNCHER[@]}"}" fairseq-train "$bin" --user-dir "$REPO/fairseq_luong" --save-dir "$dir/checkpoints" \
        --log-format simple --no-progress-bar "$@" 2>&1 \
      | tee -a "$dir/train.log" | python "$TOOLS" progress "$name"; then
    tail -20 "$dir/train.log" >&2
    die "fairseq-train failed for $name (log: $dir/train.log)"
  fi
  grep -q "done training" "$dir/train.log" || die "$name: fairseq-train ended without 'done training' ($dir/train.log)"
  touch "$dir/trained"; stamp "$dir/trained" "$key" "$dir/checkpoints"
}

# average_key NAME N: the key of WORK/systems/NAME/model.pt
average_key() {
  printf '%s average %s final\n%s' "$(ident "$WORK/systems/$1/trained")" "$2" \
    "$(code_version average "${CODE_AVERAGE[@]}")"
}

# average_last NAME N: WORK/systems/NAME/model.pt = the average of the last N saved
# states: the interval checkpoints (checkpoint_E_U.pt) and, when training went on after
# the newest of them (a time budget ends between two saves), checkpoint_last.pt, the final
# state, in place of the oldest; fewer when fewer exist; checkpoint_last.pt alone when N is 1
average_last() {
  local name="$1" n="$2" dir="$WORK/systems/$1"
  local ckpts=("$dir"/checkpoints/checkpoint_*_*.pt)
  [[ -e "${ckpts[0]}" ]] || ckpts=()
  [[ -f "$dir/trained.key" ]] || die "$name: not trained (no $dir/trained): train it first"
  local key; key="$(average_key "$name" "$n")"
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

# validate_key NAME DATA_BIN SUBSET [fairseq-validate args]: the key of WORK/systems/NAME/SUBSET.json
validate_key() {
  local name="$1" bin="$2" subset="$3"; shift 3
  printf '%s %s\ndata: %s\n%s' "$(ident "$WORK/systems/$name/model.pt")" "$(key_of --valid-subset "$subset" "$@")" \
    "$(ident "$bin/.done")" "$(code_generate)"
}

# validate_model NAME DATA_BIN [--subset SUBSET] [fairseq-validate args]:
# WORK/systems/NAME/SUBSET.json (default valid.json), the loss and perplexity of model.pt
# on that split
validate_model() {
  local name="$1" bin="$2" dir="$WORK/systems/$1" subset=valid; shift 2
  [[ "${1:-}" == --subset ]] && { subset="$2"; shift 2; }
  local key; key="$(validate_key "$name" "$bin" "$subset" "$@")"
  fresh "$dir/$subset.json" "$key" && return
  fairseq-validate "$bin" --user-dir "$REPO/fairseq_luong" --task translation --path "$dir/model.pt" \
    --valid-subset "$subset" --log-format simple "$@" > "$dir/validate_$subset.log" 2>&1 \
    || { tail -20 "$dir/validate_$subset.log" >&2; die "fairseq-validate failed for $name ($subset)"; }
  python "$TOOLS" valid-json "$dir/validate_$subset.log" > "$dir/$subset.json"
  stamp "$dir/$subset.json" "$key"
}

# translate_key DATA_BIN CKPTS REF [fairseq-generate args]: the key of OUT_PREFIX.hyp
translate_key() {
  local bin="$1" ckpts="$2" ref="$3"; shift 3
  local key="" ckpt arg
  for ckpt in ${ckpts//:/ }; do key+="model $(ident "$ckpt")"$'\n'; done
  key+="data $(ident "$bin/.done") ref $(data_key "$ref")"$'\n'"$(key_of "$@")"
  for arg in "$@"; do [[ -f "$arg" ]] && key+=" $(data_key "$arg")"; done  # e.g. a --replace-unk DICT
  printf '%s\n%s' "$key" "$(code_generate)"
}

# translate LABEL DATA_BIN CKPTS REF OUT_PREFIX [fairseq-generate args]: OUT_PREFIX.out
# (fairseq-generate's output) and OUT_PREFIX.hyp (the hypotheses in test order, one for
# each line of REF). CKPTS: checkpoint(s) separated by ':' (an ensemble), each made by
# a step that stamped it; their identities, the args and the files they name key the output
translate() {
  local label="$1" bin="$2" ckpts="$3" ref="$4" out="$5"; shift 5
  local key; key="$(translate_key "$bin" "$ckpts" "$ref" "$@")"
  fresh "$out.hyp" "$key" && return
  say "$label: translating ($*)"
  fairseq-generate "$bin" --user-dir "$REPO/fairseq_luong" --path "$ckpts" "$@" \
    > "$out.out" 2> "$out.log" || { tail -20 "$out.log" >&2; die "fairseq-generate failed for $label ($out.log)"; }
  python "$TOOLS" hyps "$out.out" --ref "$ref" > "$out.hyp.part" || die "$label: $out.out does not cover $ref"
  mv "$out.hyp.part" "$out.hyp"
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

# score_key HYP REF [sacrebleu args]: the key of a score of HYP against REF
score_key() {
  local hyp="$1" ref="$2"; shift 2
  printf '%s\nref %s\n%s\n%s' "$(ident "$hyp")" "$(ident "$ref")" "$(key_of "$@")" "$(code_score)"
}

# score HYP REF OUT_JSON [sacrebleu args]: sacreBLEU of HYP against the raw reference REF
score() {
  local hyp="$1" ref="$2" out="$3"; shift 3
  local key; key="$(score_key "$hyp" "$ref" "$@")"
  if ! fresh "$out" "$key"; then
    sacrebleu "$ref" -i "$hyp" -m bleu -w 2 "$@" > "$out.part" || die "sacrebleu failed on $hyp"
    mv "$out.part" "$out"
    stamp "$out" "$key"
  fi
  python -c "import json,sys; s=json.load(open(sys.argv[1])); print(f\"{s['score']:.2f}  {s['verbose_score']}  {s['signature']}\")" "$out"
}
