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
  while the command line is parsed.

We check the parsed values as soon as the command line is parsed, before any data or
model is loaded, and raise a ``ConfigError`` naming the flag, its value and what to give.
"""
import functools

from fairseq import options

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
        check_values(parsed[0] if isinstance(parsed, tuple) else parsed)
        return parsed

    return wrapper


def patch_option_checks():
    """``options.parse_args_and_arch``: the values are checked before anything runs."""
    wrap_once(options, "parse_args_and_arch", _checking_values)
