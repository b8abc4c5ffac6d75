"""Option values fairseq accepts and then crashes on (or silently misuses) are refused at once.

``options.parse_args_and_arch`` (every fairseq command) accepts them, and the run stops
later with a traceback from deep inside, or prints something wrong:

* a dropout outside [0, 1) (``--dropout 1.5``): torch's ``ValueError`` when the model is
  built; 1 drops everything;
* ``--beam 0``: ``RuntimeError: cannot reshape tensor of 0 elements`` in beam search;
* ``--nbest`` above ``--beam``: fairseq-generate prints ``--beam`` hypotheses, not
  ``--nbest``, without a word;
* fairseq-interactive's ``--batch-size`` above ``--buffer-size`` (the buffer is 1 line when
  not given): ``AssertionError: --batch-size cannot be larger than --buffer-size``;
* ``--max-tokens`` or ``--batch-size`` below 1;
* fairseq-validate without ``--task`` (its parser has no default task): ``KeyError: None``
  while the command line is parsed;
* generation options beam search cannot honour (:func:`check_generation`): options of
  fairseq's other generators (``--print-step``, ``--retain-iter-history``: a ``KeyError``
  after the first batch; ``--iter-decode-*``, ``--decoding-format``, ``--eos-token``, the
  ``*-mt`` first-pass options: ignored), options that qualify one missing
  (``--sampling-topk`` without ``--sampling``: an ``AssertionError``; ``--lm-weight``,
  ``--diverse-beam-strength``, ``--retain-dropout-modules`` alone: ignored), searches that
  exclude each other (a ``ValueError``, or all but one ignored), values fairseq asserts on
  (``--temperature 0``, ``--min-len`` above ``--max-len-b``, ``--beam`` not a multiple of
  ``--diverse-beam-groups``, ``--sampling`` with ``--nbest`` other than ``--beam``), and
  what one command cannot do (``--constraints`` in fairseq-generate: a ``TypeError``;
  ``--prefix-size``, ``--score-reference``, ``--lm-path`` in fairseq-interactive: ignored
  or a traceback).

We check the parsed values as soon as the command line is parsed, before any data or
model is loaded, and raise a ``ConfigError`` naming the flag, its value and what to give.
"""
import dataclasses
import functools
import os

from fairseq import options
from fairseq.dataclass.configs import GenerationConfig

from ..errors import ConfigError
from .patching import wrap_once


def _flag(dest):
    return "--" + dest.replace("_", "-")


def check_values(args):
    """Raise ConfigError for the first value of ``args`` (a parsed namespace) that the run
    would crash on or misuse."""
    given = vars(args)
    for dest, value in sorted(given.items()):
        if dest.endswith("dropout") and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not 0 <= value < 1:
                raise ConfigError(f"{_flag(dest)} {value}: give a probability from 0 up to (not including) 1")
    for dest in ("max_tokens", "batch_size", "max_tokens_valid", "batch_size_valid"):
        value = given.get(dest)
        if value is not None and value < 1:
            raise ConfigError(f"{_flag(dest)} {value}: give a whole number of at least 1")
    beam, nbest = given.get("beam"), given.get("nbest")
    if beam is not None and beam < 1:
        raise ConfigError(f"--beam {beam}: give a beam of at least 1 (1: greedy search)")
    if nbest is not None and nbest < 1:
        raise ConfigError(f"--nbest {nbest}: give at least 1")
    if beam is not None and nbest is not None and nbest > beam:
        raise ConfigError(f"--nbest {nbest} is more than --beam {beam}: beam search keeps {beam} hypotheses; "
                          f"give --beam {nbest} or more, or --nbest {beam} or less")
    if "buffer_size" in given and given.get("batch_size"):
        buffer = max(given["buffer_size"] or 0, 1)  # fairseq-interactive reads 1 line when 0
        if given["batch_size"] > buffer:
            raise ConfigError(f"--batch-size {given['batch_size']} is more than the {buffer} line(s) "
                              f"fairseq-interactive reads at a time (--buffer-size "
                              f"{given['buffer_size'] or 'not given'}): give --buffer-size {given['batch_size']} "
                              "or more")


# options of fairseq's other generators: iterative refinement (non-autoregressive models),
# speech translation, the first pass of two-pass speech-to-speech models
OTHER_GENERATORS = {
    "print_step": "prints the refinement steps of fairseq's iterative-refinement generator "
                  "(non-autoregressive models)",
    "retain_iter_history": "prints the refinement history of fairseq's iterative-refinement generator "
                           "(non-autoregressive models)",
    "iter_decode_eos_penalty": "is for fairseq's iterative-refinement generator (non-autoregressive models)",
    "iter_decode_max_iter": "is for fairseq's iterative-refinement generator (non-autoregressive models)",
    "iter_decode_force_max_iter": "is for fairseq's iterative-refinement generator (non-autoregressive models)",
    "iter_decode_with_beam": "is for fairseq's iterative-refinement generator (non-autoregressive models); "
                             "the beam is --beam",
    "iter_decode_with_external_reranker": "is for fairseq's iterative-refinement generator "
                                          "(non-autoregressive models)",
    "decoding_format": "is for fairseq's iterative-refinement generator (non-autoregressive models)",
    "eos_token": "is for fairseq's speech translation tasks",
    "beam_mt": "is for the first-pass decoder of two-pass speech-to-speech models; the beam is --beam",
    "max_len_a_mt": "is for the first-pass decoder of two-pass speech-to-speech models; use --max-len-a",
    "max_len_b_mt": "is for the first-pass decoder of two-pass speech-to-speech models; use --max-len-b",
    "lenpen_mt": "is for the first-pass decoder of two-pass speech-to-speech models; use --lenpen",
}
GENERATION_DEFAULTS = {f.name: f.default for f in dataclasses.fields(GenerationConfig)}


def _given(given, dest):
    """Whether option ``dest`` was given a value other than fairseq's default."""
    return dest in given and given[dest] != GENERATION_DEFAULTS[dest]


def check_generation(given):
    """Raise ConfigError for the first generation option of ``given`` (a parsed namespace's
    dict) that fairseq's beam search would ignore or crash on."""
    if "beam" not in given:
        return  # not fairseq-generate or fairseq-interactive
    command = "fairseq-interactive" if "buffer_size" in given else "fairseq-generate"
    for dest, what in OTHER_GENERATORS.items():
        if _given(given, dest):
            raise ConfigError(f"{_flag(dest)} {what}; {command} translates with beam search here, which "
                              "would ignore it or fail: leave it out")
    for dest, needs in (("sampling_topk", "sampling"), ("sampling_topp", "sampling"),
                        ("diverse_beam_strength", "diverse_beam_groups"), ("lm_weight", "lm_path"),
                        ("retain_dropout_modules", "retain_dropout")):
        if _given(given, dest) and not _given(given, needs):
            raise ConfigError(f"{_flag(dest)} qualifies {_flag(needs)}, which is not given: give both, "
                              f"or leave {_flag(dest)} out")
    _check_search(given, command)
    _check_lengths(given)
    _check_command(given, command)


def _check_search(given, command):
    """One search (fairseq's build_generator takes the first it knows), with values it can use."""
    searches = [flag for flag, on in (
        ("--sampling", given.get("sampling")),
        ("--diverse-beam-groups", given.get("diverse_beam_groups", -1) > 0),
        ("--diversity-rate", given.get("diversity_rate", -1) > -1),
        ("--match-source-len", given.get("match_source_len")),
        ("--constraints", given.get("constraints"))) if on]
    if len(searches) > 1:
        raise ConfigError(f"{' and '.join(searches)} each choose how to search, and fairseq uses one of them: "
                          "give one")
    if _given(given, "sampling_topk") and _given(given, "sampling_topp"):
        raise ConfigError("--sampling-topk and --sampling-topp: fairseq samples from the top-p words and ignores "
                          "--sampling-topk; give one of them")
    if _given(given, "sampling_topk") and given["sampling_topk"] < 1:
        raise ConfigError(f"--sampling-topk {given['sampling_topk']}: give a number of words of at least 1")
    if _given(given, "sampling_topp") and not 0 < given["sampling_topp"] <= 1:
        raise ConfigError(f"--sampling-topp {given['sampling_topp']}: give a probability above 0, up to 1")
    if given.get("sampling") and given["nbest"] != given["beam"]:
        raise ConfigError(f"--sampling draws --beam {given['beam']} translations of each sentence and {command} "
                          f"prints them all: give --nbest {given['beam']} (or --beam {given['nbest']})")
    if given.get("temperature", 1) <= 0:
        raise ConfigError(f"--temperature {given['temperature']}: give a temperature above 0 (1: the model's "
                          "probabilities; below 1 sharper, above 1 flatter)")
    groups = given.get("diverse_beam_groups", -1)
    if groups > 0 and given["beam"] % groups:
        raise ConfigError(f"--diverse-beam-groups {groups} does not divide --beam {given['beam']}: each group "
                          f"searches with --beam / --diverse-beam-groups hypotheses; give --beam {groups * 2}, "
                          f"for instance")


def _check_lengths(given):
    """Length options that contradict each other."""
    if given.get("match_source_len"):
        for dest in ("min_len", "max_len_a", "max_len_b", "prefix_size"):
            if _given(given, dest):
                raise ConfigError(f"--match-source-len gives each translation its source's length, which "
                                  f"{_flag(dest)} {given[dest]} would contradict: give one of them")
    elif given.get("max_len_a", 0) == 0 and given.get("min_len", 1) > given.get("max_len_b", 200):
        raise ConfigError(f"--min-len {given['min_len']} is more than the length limit --max-len-b "
                          f"{given['max_len_b']}: give --max-len-b {given['min_len']} or more")


def _check_command(given, command):
    """What only one of fairseq-generate and fairseq-interactive does."""
    if command == "fairseq-interactive":
        for dest, why in (("prefix_size", "takes the prefix from the reference translation"),
                          ("score_reference", "scores the reference translations"),
                          ("lm_path", "adds a language model's scores (fairseq-interactive loads none)")):
            if _given(given, dest):
                raise ConfigError(f"{_flag(dest)} {why}: fairseq-generate does, fairseq-interactive does not; "
                                  "use fairseq-generate on a binarized test set")
    elif given.get("constraints"):
        raise ConfigError("--constraints: fairseq-generate reads no constraints; give them to fairseq-interactive, "
                          "after a tab on each input line (source<TAB>constraint<TAB>...)")
    if _given(given, "lm_path") and given.get("data"):
        lm_dict = os.path.join(str(given["data"]).split(os.pathsep)[0], "dict.txt")
        if "://" not in lm_dict and not os.path.exists(lm_dict):
            raise ConfigError(f"--lm-path: fairseq loads the language model's dictionary from {lm_dict}, which "
                              "does not exist: copy the target dictionary (dict.TGT.txt) there")


def _checking_values(parse_args_and_arch):
    @functools.wraps(parse_args_and_arch)
    def wrapper(parser, *args, **kwargs):
        try:
            parsed = parse_args_and_arch(parser, *args, **kwargs)
        except KeyError as e:
            if e.args != (None,):
                raise
            raise ConfigError("no --task: this command has no default task; give the one the model was trained "
                              "with (--task translation, or translation_chunks for perSPE)") from e
        args = parsed[0] if isinstance(parsed, tuple) else parsed
        check_values(args)
        check_generation(vars(args))
        return parsed

    return wrapper


def patch_option_checks():
    """``options.parse_args_and_arch``: the values are checked before anything runs."""
    wrap_once(options, "parse_args_and_arch", _checking_values)
