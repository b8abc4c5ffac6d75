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

Scores are natural logarithms, as fairseq computes them (fairseq-generate prints base 2).
Pieces are the dictionary's symbols the model reads and writes (after ``--bpe``, e.g.
SentencePiece pieces), ``</s>`` last; an alignment is fairseq-generate's ``--print-alignment``
(hard): for each target piece but ``</s>``, (index of the source piece it attends to most,
its own index), both counted without ``</s>``.
"""
import copy
from typing import Dict, List, Optional, Union

import torch
from fairseq import hub_utils, utils
from fairseq.data import LanguagePairDataset
from fairseq.hub_utils import GeneratorHubInterface
from omegaconf import open_dict


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

    def nbest(self, sentences: Union[str, List[str]], n: Optional[int] = None, beam: int = 5,
              **generation_options) -> Union[List[Dict], List[List[Dict]]]:
        """The ``n`` (default: ``beam``) best translations of a sentence, best first, as dicts:
        ``translation`` (decoded text), ``score`` (fairseq's: ``log_prob`` / length ** lenpen,
        the length counting ``</s>``), ``log_prob``, ``positional_scores`` (log p of each of
        ``pieces``), ``pieces``, ``source_pieces``, ``alignment`` (None for a model without
        attention). For a list of sentences, one such list each."""
        if isinstance(sentences, str):
            return self.nbest([sentences], n, beam, **generation_options)[0]
        if n is not None and not 1 <= n <= beam:
            raise ValueError(f"n = {n}: beam search with beam = {beam} finds 1 to {beam} translations")
        src = [self.encode(sentence) for sentence in sentences]
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
            raise TypeError("score(source, target): give the translation to score")
        if isinstance(sources, str) != isinstance(targets, str):
            raise TypeError("score(source, target): two strings, or two lists of strings")
        if isinstance(sources, str):
            return self.score([sources], [targets], **generation_options)[0]
        if len(sources) != len(targets):
            raise ValueError(f"score: {len(sources)} sources but {len(targets)} targets")
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
