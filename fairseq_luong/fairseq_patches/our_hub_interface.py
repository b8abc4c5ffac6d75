"""fairseq's own ``from_pretrained`` gives the plugin's models their Python interface (ours).

fairseq's ``BaseFairseqModel.from_pretrained`` (fairseq/models/fairseq_model.py) returns a
``GeneratorHubInterface`` whatever the checkpoint holds: called on a base class
(``fairseq.models.FairseqModel.from_pretrained``) for one of our checkpoints, it loses the
interface the model's own class returns (``models/hub_interface.py``), and its ``score`` raises
``TypeError`` and ``generate(print_alignment="hard")`` ``IndexError``. With the plugin, when
every loaded model is one of ours, the same models come back as our ``TranslationHubInterface``
(the loaded models, tasks and options, not loaded twice); anything else is left as fairseq
returns it.
"""
import functools

from fairseq.hub_utils import GeneratorHubInterface
from fairseq.models import BaseFairseqModel

from fairseq_fixes.patching import OURS, patch, wrap_once


def _our_models_interface(from_pretrained):
    @functools.wraps(from_pretrained)
    def wrapper(cls, *args, **kwargs):
        # imported here: the patches are applied before the models are imported (register())
        from ..models.hub_interface import TranslationHubInterface, TranslationHubModel

        hub = from_pretrained(cls, *args, **kwargs)
        if type(hub) is GeneratorHubInterface and all(isinstance(m, TranslationHubModel) for m in hub.models):
            return TranslationHubInterface(hub.cfg, hub.task, list(hub.models))
        return hub

    return wrapper


@patch(OURS, "FairseqModel.from_pretrained on one of the plugin's checkpoints: the interface our model classes "
       "return; fairseq's own models keep theirs")
def patch_from_pretrained():
    """``BaseFairseqModel.from_pretrained`` (a classmethod): our models get our interface."""
    wrap_once(BaseFairseqModel, "from_pretrained", _our_models_interface)
