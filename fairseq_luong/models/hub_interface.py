"""The Python interface of the plugin's models: what their ``from_pretrained`` returns.

fairseq's ``GeneratorHubInterface`` (fairseq/hub_utils.py) loads a checkpoint with its
dictionaries, tokenizer and subword model, translates (``translate``) and runs beam search on
token ids (``generate``); it moves with ``.cuda()``, ``.half()``, ``.bfloat16()`` as any
``nn.Module``. For translation it lacks two things, which :class:`TranslationHubInterface`
adds in fairseq's idiom (as BART's and RoBERTa's hub interfaces subclass it):

* ``nbest``: the n best translations of a sentence with their scores and alignments
  (fairseq's ``generate(print_alignment="hard")`` raises ``IndexError`` for recurrent
  decoders, prepared without their attention: here they keep it, and it works);
* ``score(source, target)``: the log-probability of a given translation, piece by piece
  (fairseq's ``score`` is for language models: ``TypeError`` for translation models).

Every call checks its arguments before any work, as the command line checks its options
(fairseq's own ``translate``/``generate`` ignored a misspelt ``beem=5`` and failed deep in
the sequence generator on ``beam=0`` or ``translate(None)``): sentences are a str or a list
of str; generation options are fairseq-generate's, by keyword, with values it can use
(``checks/generation.py``); ``nbest``'s ``n`` is one beam search can give. Each
refusal is one line (an ``ArgumentError``, a ``TypeError``, for a type; a ``ConfigError``, a
``ValueError``, for a value). What ``from_pretrained`` checks is in ``fairseq_patches/hub_checks.py``.

Scores are natural logarithms, as fairseq computes them (fairseq-generate prints base 2).
Pieces are the dictionary's symbols the model reads and writes (after ``--bpe``, e.g.
SentencePiece pieces), ``</s>`` last; an alignment is fairseq-generate's ``--print-alignment``
(hard): for each target piece but ``</s>``, (index of the source piece it attends to most,
its own index), both counted without ``</s>``.
"""
import copy
import numbers
from typing import Dict, List, Optional, Union

import torch
from fairseq import hub_utils, utils
from fairseq.data import LanguagePairDataset
from fairseq.hub_utils import GeneratorHubInterface
from omegaconf import open_dict

from ..checks.generation import check_generation_keywords
from ..errors import ArgumentError, ConfigError

# keywords fairseq's translate/sample pass on to its generate, besides the generation options
GENERATE_KEYWORDS = ("verbose", "skip_invalid_size_inputs", "inference_step_args", "prefix_allowed_tokens_fn")


def sentence_list(call: str, name: str, sentences) -> List[str]:
    """``sentences`` (a str, or a list or tuple of str) as a list; ArgumentError naming the call
    and what it was given otherwise."""
    if isinstance(sentences, str):
        return [sentences]
    if isinstance(sentences, (bytes, bytearray)):
        raise ArgumentError(f"{call}: {name} is bytes: decode it (.decode('utf-8')) and give a str or a list of str")
    if not isinstance(sentences, (list, tuple)):
        hint = " (list(...) makes one of it)" if hasattr(sentences, "__iter__") else ""
        given = "None" if sentences is None else type(sentences).__name__
        raise ArgumentError(f"{call}: give a str or a list of str as {name}, not {given}{hint}")
    for i, sentence in enumerate(sentences, 1):
        if not isinstance(sentence, str):
            what = ("bytes: decode it (.decode('utf-8'))" if isinstance(sentence, (bytes, bytearray)) else
                    f"{'None' if sentence is None else type(sentence).__name__}, not str")
            raise ArgumentError(f"{call}: item {i} of {name} is {what}; give a str or a list of str")
    return list(sentences)


class TranslationHubInterface(GeneratorHubInterface):
    """fairseq's hub interface with ``nbest`` and ``score`` for translation (module docstring).

    ``translate(sentences, beam=5, **generation_options)``, ``encode``/``decode`` and
    ``generate`` (token ids) are fairseq's; generation options are fairseq-generate's
    (``max_len_b=50``, ``lenpen=0.6``, ...)."""

    def __init__(self, cfg, task, models):
        super().__init__(cfg, task, models)
        for model in self.models:
            # recurrent decoders (ours, fairseq's lstm) return their attention only when asked
            # (fairseq prepares them so for --print-alignment); a model without attention has none
            if hasattr(model.decoder, "need_attn"):
                model.decoder.need_attn = True

    def translate(self, sentences: Union[str, List[str]], beam: int = 5, verbose: bool = False,
                  **generation_options) -> Union[str, List[str]]:
        """fairseq's ``translate``, its arguments checked first (module docstring)."""
        sentence_list("translate", "sentences", sentences)
        check_generation_keywords("translate", dict(generation_options, beam=beam), self.cfg.generation,
                                  GENERATE_KEYWORDS, self.task)
        return super().translate(sentences, beam, verbose, **generation_options)

    def sample(self, sentences: Union[str, List[str]], beam: int = 1, verbose: bool = False,
               **generation_options) -> Union[str, List[str]]:
        """fairseq's ``sample``, its arguments checked first (module docstring)."""
        sentence_list("sample", "sentences", sentences)
        check_generation_keywords("sample", dict(generation_options, beam=beam), self.cfg.generation,
                                  GENERATE_KEYWORDS, self.task)
        return super().sample(sentences, beam, verbose, **generation_options)

    def generate(self, tokenized_sentences: List[torch.LongTensor], beam: int = 5, verbose: bool = False,
                 *args, **generation_options) -> List[List[Dict]]:
        """fairseq's ``generate`` (token ids), its generation options checked first."""
        check_generation_keywords("generate", dict(generation_options, beam=beam), self.cfg.generation,
                                  GENERATE_KEYWORDS, self.task)
        return super().generate(tokenized_sentences, beam, verbose, *args, **generation_options)

    def nbest(self, sentences: Union[str, List[str]], n: Optional[int] = None, beam: int = 5,
              **generation_options) -> Union[List[Dict], List[List[Dict]]]:
        """The ``n`` (default: ``beam``) best translations of a sentence, best first, as dicts:
        ``translation`` (decoded text), ``score`` (fairseq's: ``log_prob`` / length ** lenpen,
        the length counting ``</s>``), ``log_prob``, ``positional_scores`` (log p of each of
        ``pieces``), ``pieces``, ``source_pieces``, ``alignment`` (None for a model without
        attention). For a list of sentences, one such list each."""
        listed = sentence_list("nbest", "sentences", sentences)
        if "nbest" in generation_options:  # fairseq-generate's name for n
            raise ConfigError(f"nbest: nbest={generation_options['nbest']!r}: the number of translations is n here; "
                              f"give n={generation_options['nbest']!r}")
        check_generation_keywords("nbest", dict(generation_options, beam=beam), self.cfg.generation, task=self.task)
        self._check_n(n, beam)
        if isinstance(sentences, str):
            return self.nbest(listed, n, beam, **generation_options)[0]
        src = [self.encode(sentence) for sentence in listed]
        dataset = self.task.build_dataset_for_inference(src, [len(t) for t in src])
        generator = self.task.build_generator(self.models, self._options(beam=beam, **generation_options))
        found = {}
        for i, source, hypos in self._run(generator, dataset):
            found[i] = [self._hypothesis(source, hypo, self._alignment(source, hypo),
                                         translation=self.decode(hypo["tokens"]))
                        for hypo in hypos[:n or beam]]
        return [found[i] for i in range(len(src))]

    def score(self, sources: Union[str, List[str]], targets: Union[str, List[str], None] = None,
              **generation_options) -> Union[Dict, List[Dict]]:
        """How the model scores ``targets`` as translations of ``sources`` (two strings, or two
        lists), as fairseq-generate ``--score-reference`` does: a dict each with
        ``positional_scores`` (log p of each of ``pieces``, ``</s>`` last, given the pieces
        before it), ``log_prob`` (their sum), ``score`` (their mean), ``pieces``,
        ``source_pieces`` and ``alignment`` (None for a model without attention)."""
        if targets is None:
            raise ArgumentError("score(source, target): give the translation to score")
        listed = sentence_list("score", "sources", sources), sentence_list("score", "targets", targets)
        if isinstance(sources, str) != isinstance(targets, str):
            raise ArgumentError("score(source, target): two strings, or two lists of strings")
        for key in ("score_reference", "print_alignment"):
            if key in generation_options:
                raise ConfigError(f"score: {key}={generation_options[key]!r} is score's own setting; leave it out")
        check_generation_keywords("score", generation_options, self.cfg.generation, task=self.task)
        if isinstance(sources, str):
            return self.score(*listed, **generation_options)[0]
        if len(sources) != len(targets):
            raise ConfigError(f"score: {len(sources)} sources but {len(targets)} targets: give one target each")
        src = [self.encode(sentence) for sentence in sources]
        tgt = [self.encode_target(sentence) for sentence in targets]
        dataset = LanguagePairDataset(src, [len(t) for t in src], self.src_dict,
                                      tgt, [len(t) for t in tgt], self.tgt_dict)
        # fairseq's SequenceScorer, with the alignment of --print-alignment
        scorer = self.task.build_generator(
            self.models, self._options(score_reference=True, print_alignment="hard", **generation_options))
        scored = {i: self._hypothesis(source, hypos[0], hypos[0]["alignment"])
                  for i, source, hypos in self._run(scorer, dataset)}
        return [scored[i] for i in range(len(src))]

    def encode_target(self, sentence: str) -> torch.LongTensor:
        """``encode`` for the target side: the target dictionary's ids (with ``</s>``)."""
        pieces = self.apply_bpe(self.tokenize(sentence))
        return self.tgt_dict.encode_line(pieces, add_if_not_exist=False).long()

    # ------------------------------------------------------------------ helpers
    def _check_n(self, n, beam):
        """``nbest``'s ``n`` (None: ``beam``) is a number of hypotheses beam search gives: at most
        ``beam``, and at most the target dictionary's size less one (fairseq's SequenceGenerator
        caps the beam there, and would return fewer without a word)."""
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral)):
            raise ConfigError(f"nbest: n={n!r}: give a whole number of translations")
        if n is not None and n < 1:
            raise ConfigError(f"nbest: n={n}: give at least 1")
        if n is not None and n > beam:
            raise ConfigError(f"nbest: n={n} is more than beam={beam}: beam search keeps {beam} hypotheses; give "
                              f"beam={n} or more, or n={beam} or less")
        keeps = len(self.tgt_dict) - 1
        if (n or beam) > keeps:
            asked = f"n={n}" if n is not None else f"beam={beam} (n defaults to it)"
            raise ConfigError(f"nbest: {asked} is more than the {keeps} hypotheses beam search keeps for this model "
                              f"(fairseq caps the beam at its target dictionary's {len(self.tgt_dict)} symbols less "
                              f"one): give n={keeps} or less")

    def _options(self, **options):
        """The checkpoint's generation options with ``options`` set, as fairseq's ``generate``."""
        generation = copy.deepcopy(self.cfg.generation)
        with open_dict(generation):
            for key, value in options.items():
                setattr(generation, key, value)
        return generation

    def _run(self, generator, dataset):
        """(sentence index, its source row as batched, its hypotheses) for each sentence of
        ``dataset``, batched and moved to the model's device as fairseq's ``generate`` does."""
        batches = self.task.get_batch_iterator(
            dataset=dataset, max_tokens=self.cfg.dataset.max_tokens, max_sentences=self.cfg.dataset.batch_size,
            max_positions=self.max_positions, disable_iterator_cache=True,
        ).next_epoch_itr(shuffle=False)
        for batch in batches:
            batch = utils.apply_to_sample(lambda t: t.to(self.device), batch)
            found = self.task.inference_step(generator, self.models, batch)
            yield from zip(batch["id"].tolist(), batch["net_input"]["src_tokens"].cpu(), found)

    def _alignment(self, source: torch.Tensor, hypo: Dict) -> Optional[List]:
        """fairseq-generate's --print-alignment hard (SequenceGeneratorWithAlignment): from the
        hypothesis' attention (srclen x tgtlen, the source as batched); None without one."""
        attention = hypo["attention"]
        if attention is None or attention.numel() == 0:
            return None
        return utils.extract_hard_alignment(attention.t().float().cpu(), source, hypo["tokens"].cpu(),
                                            self.src_dict.pad(), self.src_dict.eos())

    def _hypothesis(self, source: torch.Tensor, hypo: Dict, alignment: Optional[List], **extra) -> Dict:
        """A hypothesis (or a scored reference) of fairseq's generators as plain Python values."""
        positional = hypo["positional_scores"].float().cpu()
        return {
            **extra,
            "score": float(hypo["score"]),
            "log_prob": float(positional.sum()),
            "positional_scores": positional.tolist(),
            "pieces": [self.tgt_dict[i] for i in hypo["tokens"].tolist()],
            "source_pieces": [self.src_dict[i] for i in source.tolist() if i != self.src_dict.pad()],
            "alignment": None if alignment is None else [(int(s), int(t)) for s, t in alignment],
        }


class TranslationHubModel:
    """For the plugin's models (the first base class): ``from_pretrained`` returns a
    :class:`TranslationHubInterface`; no archive of pretrained models (fairseq's
    ``TransformerModel.hub_models`` names fairseq's own Transformers, which are not ours)."""

    @classmethod
    def from_pretrained(cls, model_name_or_path, checkpoint_file="model.pt", data_name_or_path=".", **kwargs):
        """Load ``model_name_or_path/checkpoint_file`` (``a.pt:b.pt``: an ensemble) with the
        dictionaries of ``data_name_or_path`` (relative paths starting with ``.`` are inside
        ``model_name_or_path``); ``kwargs`` override the checkpoint's options, e.g.
        ``bpe="sentencepiece", sentencepiece_model="spm/joint.model"``, or a generation
        option (``beam=5``)."""
        x = hub_utils.from_pretrained(model_name_or_path, checkpoint_file, data_name_or_path,
                                      archive_map=cls.hub_models(), **kwargs)
        return TranslationHubInterface(x["args"], x["task"], x["models"])

    @classmethod
    def hub_models(cls):
        return {}
