"""fairseq-interactive --print-alignment soft is refused before any work (a check).

``fairseq-interactive --print-alignment soft`` translated the first line and then stopped with
``ValueError: too many values to unpack`` (fairseq_cli/interactive.py prints every alignment as
``source-target`` pairs; a soft alignment is a row of weights per target token).
fairseq-generate prints soft alignments; we refuse the option in fairseq-interactive before any
model is loaded, naming both alternatives.
"""
import functools

from fairseq_fixes.errors import UserError
from fairseq_fixes.patching import CHECK, as_config, fairseq_cli_modules, patch, wrap_once


def _no_soft_alignment(main):
    @functools.wraps(main)
    def wrapper(cfg, *args, **kwargs):
        cfg = as_config(cfg)  # interactive.main takes a Namespace too
        if getattr(cfg.generation, "print_alignment", None) == "soft":
            raise UserError(
                "--print-alignment soft: fairseq-interactive prints hard alignments only (its A- lines "
                "are source-target pairs); use --print-alignment, or fairseq-generate --print-alignment "
                "soft for the attention weights"
            )
        return main(cfg, *args, **kwargs)

    return wrapper


@patch(CHECK, "fairseq-interactive --print-alignment soft (fairseq fails after the first line)")
def patch_interactive_soft_alignment():
    """fairseq-interactive's ``main``: ``--print-alignment soft`` is refused before any work."""
    for module in fairseq_cli_modules("interactive"):
        wrap_once(module, "main", _no_soft_alignment)
