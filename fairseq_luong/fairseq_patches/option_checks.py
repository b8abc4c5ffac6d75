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

The Python interface (``from_pretrained``, ``translate``, ``nbest``, ``score``) runs the same
checks on its generation options (:func:`check_generation_keywords`, for
``models/hub_interface.py`` and ``hub.py``): a misspelt keyword (``beem=5``) was ignored, a
value of the wrong type or out of range (``beam=0``, ``beam="5"``) failed deep in the
sequence generator. Each is refused before any work, the message naming the keyword as the
call takes it (``patching.option``), a misspelling with the nearest valid name.
"""
import functools

from fairseq import options

from fairseq_fixes.patching import CHECK, patch, wrap_once

from ..checks.generation import check_generation, check_values
from ..errors import ConfigError


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


@patch(CHECK, "option values fairseq would crash on or misuse, for every command; the generation options only for a "
       "task that generates with FairseqTask.build_generator")
def patch_option_checks():
    """``options.parse_args_and_arch``: the values are checked before anything runs."""
    wrap_once(options, "parse_args_and_arch", _checking_values)
