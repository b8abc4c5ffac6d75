"""``python -m fairseq_luong.fairseq_patches``: every patch the plugin brings to fairseq, the fixes
of ``fairseq_fixes`` included, by kind, with what each acts on and the names it wraps or replaces
(``--markdown``: the table of docs/fairseq_patches.md)."""
import fairseq  # noqa: F401 (the patches apply once fairseq is imported)

import fairseq_fixes.__main__ as fixes_main
import fairseq_luong  # noqa: F401


def markdown():
    return fixes_main.markdown(package=None)


def main(argv=None):
    fixes_main.main(argv, description=__doc__.split("\n\n")[0], package=None)


if __name__ == "__main__":
    main()
