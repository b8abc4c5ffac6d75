"""Generation and other option values fairseq accepts and then crashes on (or silently misuses).

The checks themselves, for the command line (``fairseq_patches/option_checks.py`` runs
:func:`check_values` and :func:`check_generation` once the command line is parsed) and for the
Python interface (:func:`check_generation_keywords`: ``from_pretrained`` and the models'
``translate``, ``nbest``, ``score``). What each refuses and why is in that module's docstring.

**Premise**: a generation check refuses an option only where the run would ignore it or fail on
it, and that depends on the task's generator. :func:`check_generation` runs only for a task
whose ``build_generator`` is fairseq's own (``FairseqTask.build_generator``: beam search,
sampling, diverse beam search with fairseq's ``SequenceGenerator``). A task with a generator of
its own (``translation_lev``'s iterative refinement, the speech tasks, multilingual translation)
reads options beam search does not: its options are left to it.
"""
import argparse
import dataclasses
import difflib
import numbers
import os
import typing

from fairseq.dataclass.configs import GenerationConfig
from omegaconf import OmegaConf

from fairseq_fixes.option_names import in_python_call, option, python_call

from ..errors import ConfigError


def check_values(args):
    """Raise ConfigError for the first value of ``args`` (a parsed namespace) that the run
    would crash on or misuse, whatever the task (the generation options: :func:`check_generation`)."""
    given = vars(args)
    for dest, value in sorted(given.items()):
        if dest.endswith("dropout") and isinstance(value, (int, float)) and not isinstance(value, bool):
            if not 0 <= value < 1:
                raise ConfigError(f"{option(dest, value)}: give a probability from 0 up to (not including) 1")
    for dest in ("max_tokens", "batch_size", "max_tokens_valid", "batch_size_valid"):
        value = given.get(dest)
        if value is not None and value < 1:
            raise ConfigError(f"{option(dest, value)}: give a whole number of at least 1")
    # (a negative --max-len-b is fine with --max-len-a: "-a 1 -b -1" is the source's length)
    for dest in ("max_len_a", "min_len", "no_repeat_ngram_size", "prefix_size"):
        value = given.get(dest)
        if isinstance(value, (int, float)) and value < 0:
            raise ConfigError(f"{option(dest, value)}: give 0 or more")
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


def uses_sequence_generator(task) -> bool:
    """Whether ``task`` (a registered name, a task class or a task) generates with fairseq's own
    ``FairseqTask.build_generator``, the one these checks know (module docstring). An unknown
    name: False (fairseq says what it knows)."""
    from fairseq.tasks import TASK_REGISTRY, FairseqTask

    cls = TASK_REGISTRY.get(task) if isinstance(task, str) else task if isinstance(task, type) else type(task)
    return cls is not None and issubclass(cls, FairseqTask) and cls.build_generator is FairseqTask.build_generator


def check_generation(given, task=None):
    """Raise ConfigError for the first generation option of ``given`` (a parsed namespace's
    dict, or the generation config of a Python call) that fairseq's beam search would ignore
    or crash on, when ``task`` (default: ``given["task"]``, the command line's) generates with
    it: nothing for a task with a generator of its own."""
    if "beam" not in given:
        return  # not fairseq-generate or fairseq-interactive
    if not uses_sequence_generator(given.get("task") if task is None else task):
        return
    command = ("the Python interface" if in_python_call() else
               "fairseq-interactive" if "buffer_size" in given else "fairseq-generate")
    beam, nbest = given.get("beam"), given.get("nbest")
    if beam is not None and beam < 1:
        raise ConfigError(f"{option('beam', beam)}: give a beam of at least 1 (1: greedy search)")
    if nbest is not None and nbest < 1:
        raise ConfigError(f"{option('nbest', nbest)}: give at least 1")
    if beam is not None and nbest is not None and nbest > beam:
        raise ConfigError(f"{option('nbest', nbest)} is more than {option('beam', beam)}: beam search keeps {beam} "
                          f"hypotheses; give {option('beam', nbest)} or more, or {option('nbest', beam)} or less")
    for dest, what in OTHER_GENERATORS.items():
        if _given(given, dest):
            raise ConfigError(f"{option(dest)} {what}; {command} translates with beam search here, which "
                              "would ignore it or fail: leave it out")
    for dest, needs in (("sampling_topk", "sampling"), ("sampling_topp", "sampling"),
                        ("diverse_beam_strength", "diverse_beam_groups"), ("lm_weight", "lm_path"),
                        ("retain_dropout_modules", "retain_dropout")):
        if _given(given, dest) and not _given(given, needs):
            raise ConfigError(f"{option(dest)} qualifies {option(needs)}, which is not given: give both, "
                              f"or leave {option(dest)} out")
    _check_search(given, command)
    _check_lengths(given)
    _check_command(given, command)


def _check_search(given, command):
    """One search (fairseq's build_generator takes the first it knows), with values it can use."""
    searches = [option(dest) for dest, on in (
        ("sampling", given.get("sampling")),
        ("diverse_beam_groups", given.get("diverse_beam_groups", -1) > 0),
        ("diversity_rate", given.get("diversity_rate", -1) > -1),
        ("match_source_len", given.get("match_source_len")),
        ("constraints", given.get("constraints"))) if on]
    if len(searches) > 1:
        raise ConfigError(f"{' and '.join(searches)} each choose how to search, and fairseq uses one of them: "
                          "give one")
    if _given(given, "sampling_topk") and _given(given, "sampling_topp"):
        raise ConfigError(f"{option('sampling_topk')} and {option('sampling_topp')}: fairseq samples from the top-p "
                          f"words and ignores {option('sampling_topk')}; give one of them")
    if _given(given, "sampling_topk") and given["sampling_topk"] < 1:
        raise ConfigError(f"{option('sampling_topk', given['sampling_topk'])}: give a number of words of at least 1")
    if _given(given, "sampling_topp") and not 0 < given["sampling_topp"] <= 1:
        raise ConfigError(f"{option('sampling_topp', given['sampling_topp'])}: give a probability above 0, up to 1")
    if given.get("sampling") and given["nbest"] != given["beam"] and not in_python_call():
        raise ConfigError(f"--sampling draws --beam {given['beam']} translations of each sentence and {command} "
                          f"prints them all: give --nbest {given['beam']} (or --beam {given['nbest']})")
    if given.get("temperature", 1) <= 0:
        raise ConfigError(f"{option('temperature', given['temperature'])}: give a temperature above 0 (1: the "
                          "model's probabilities; below 1 sharper, above 1 flatter)")
    groups = given.get("diverse_beam_groups", -1)
    if groups > 0 and given["beam"] % groups:
        raise ConfigError(f"{option('diverse_beam_groups', groups)} does not divide {option('beam', given['beam'])}: "
                          f"each group searches with {option('beam')} / {option('diverse_beam_groups')} hypotheses; "
                          f"give {option('beam', groups * 2)}, for instance")


def _check_lengths(given):
    """Length options that contradict each other."""
    if given.get("match_source_len"):
        for dest in ("min_len", "max_len_a", "max_len_b", "prefix_size"):
            if _given(given, dest):
                raise ConfigError(f"{option('match_source_len')} gives each translation its source's length, which "
                                  f"{option(dest, given[dest])} would contradict: give one of them")
    elif given.get("max_len_a", 0) == 0 and given.get("min_len", 1) > given.get("max_len_b", 200):
        raise ConfigError(f"{option('min_len', given['min_len'])} is more than the length limit "
                          f"{option('max_len_b', given['max_len_b'])}: give {option('max_len_b', given['min_len'])} "
                          "or more")


def _check_command(given, command):
    """What only one of fairseq-generate and fairseq-interactive does."""
    if command != "fairseq-generate":
        for dest, why, instead in (
                ("prefix_size", "takes the prefix from the reference translation", ""),
                ("score_reference", "scores the reference translations", "; score() scores a translation you give"),
                ("lm_path", f"adds a language model's scores ({command} loads none)", "")):
            if _given(given, dest):
                instead = instead if in_python_call() else "; use fairseq-generate on a binarized test set"
                raise ConfigError(f"{option(dest)} {why}: fairseq-generate does, {command} does not{instead}")
    elif given.get("constraints"):
        raise ConfigError("--constraints: fairseq-generate reads no constraints; give them to fairseq-interactive, "
                          "after a tab on each input line (source<TAB>constraint<TAB>...)")
    if _given(given, "lm_path") and given.get("data"):
        lm_dict = os.path.join(str(given["data"]).split(os.pathsep)[0], "dict.txt")
        if "://" not in lm_dict and not os.path.exists(lm_dict):
            raise ConfigError(f"--lm-path: fairseq loads the language model's dictionary from {lm_dict}, which "
                              "does not exist: copy the target dictionary (dict.TGT.txt) there")


GENERATION_TYPES = {f.name: f.type for f in dataclasses.fields(GenerationConfig) if f.name != "_name"}


def _type_problem(dest, value):
    """What is wrong with the type of ``value`` for generation option ``dest``; None if nothing."""
    kind = GENERATION_TYPES[dest]
    optional = typing.get_origin(kind) is typing.Union and type(None) in typing.get_args(kind)
    if kind is typing.Any or (value is None and optional):
        return None
    kind = next(a for a in typing.get_args(kind) if a is not type(None)) if optional else kind
    if kind is bool:
        return None if isinstance(value, bool) else "give True or False"
    if isinstance(value, bool) or kind in (int, float) and value is None:
        return "give a whole number" if kind is int else "give a number"
    if kind is int:
        return None if isinstance(value, numbers.Integral) else "give a whole number"
    if kind is float:
        return None if isinstance(value, numbers.Real) else "give a number"
    choices = [c.value for c in kind] if isinstance(kind, type) and hasattr(kind, "__members__") else None
    if choices is not None:
        return None if value in choices else f"give one of {', '.join(map(repr, choices))}"
    return None if isinstance(value, str) else "give a str"


def check_generation_keywords(call, options, generation, allowed=(), task=None):
    """Raise ConfigError for a keyword of the Python call ``call`` ("translate") that is no
    generation option (nor one of ``allowed``: the call's own), of the wrong type, or whose
    value, with the rest of ``generation`` (the loaded model's generation config), beam search
    would crash on or ignore when ``task`` (the loaded task) generates with it: the checks of
    the command line, in the call's terms."""
    names = sorted(set(GENERATION_TYPES) | set(allowed))
    with python_call(call):
        for key, value in options.items():
            if key not in names:
                near = difflib.get_close_matches(key, names, n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise ConfigError(f"{call}: no option {key!r}{hint}; the generation options are "
                                  "fairseq-generate's, by keyword: beam, lenpen, max_len_a, max_len_b, min_len, "
                                  "unkpen, no_repeat_ngram_size, sampling, ...")
            problem = _type_problem(key, value) if key in GENERATION_TYPES else None
            if problem:
                raise ConfigError(f"{call}: {option(key, value)}: {problem}")
        given = OmegaConf.to_container(generation) if OmegaConf.is_config(generation) else dict(generation or {})
        given.update((k, v) for k, v in options.items() if k in GENERATION_TYPES)
        try:
            check_values(argparse.Namespace(**given))
            check_generation(given, task)
        except ConfigError as err:
            raise ConfigError(f"{call}: {err}") from None
