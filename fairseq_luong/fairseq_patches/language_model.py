"""``--lm-path`` must be a language model over the target words (a check).

fairseq-generate and fairseq-interactive with ``--lm-path`` and a checkpoint that is not a
language model, or one over another dictionary: a ``TypeError`` from deep in the model at the
first step, or a size mismatch, or silently wrong scores where the sizes agree.
``SequenceGenerator.__init__`` now refuses both in one line, before the first batch.
"""
import functools

from fairseq.models import FairseqLanguageModel
from fairseq.sequence_generator import SequenceGenerator

from fairseq_fixes.errors import UserError
from fairseq_fixes.patching import CHECK, patch, wrap_once


def _checked_language_model(init):
    @functools.wraps(init)
    def __init__(self, models, tgt_dict, *args, lm_model=None, **kwargs):
        if lm_model is not None:
            if not isinstance(lm_model, FairseqLanguageModel):
                raise UserError(f"--lm-path: the checkpoint holds a {type(lm_model).__name__}, not a language "
                                "model; train one on the target language (fairseq-train --task language_modeling "
                                "on text binarized with the target dictionary)")
            lm_words = lm_model.decoder.dictionary.symbols
            if lm_words != tgt_dict.symbols:
                raise UserError(f"--lm-path: the language model's dictionary ({len(lm_words)} words, dict.txt of "
                                f"the data directory) is not the target dictionary ({len(tgt_dict)} words): "
                                "its scores would go to other words")
        init(self, models, tgt_dict, *args, lm_model=lm_model, **kwargs)

    return __init__


@patch(CHECK, "--lm-path with a translation checkpoint (fairseq: TypeError) or a language model over another "
       "dictionary of the same size (wrong scores)")
def patch_language_model():
    """``SequenceGenerator.__init__``: --lm-path must be a language model over the target words."""
    wrap_once(SequenceGenerator, "__init__", _checked_language_model)
