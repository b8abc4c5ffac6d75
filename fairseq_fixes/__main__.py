"""``python -m fairseq_fixes``: every fix, with what it acts on and the names of fairseq, torch and
numpy it wraps or replaces (``--markdown``: one table)."""
import argparse

import fairseq  # noqa: F401 (the fixes apply once fairseq is imported)

import fairseq_fixes  # noqa: F401
from fairseq_fixes.patching import by_kind

HEADINGS = {"fix": "fixes of fairseq (every fairseq model; its own results unchanged where fairseq worked)",
            "check": "checks (one line, only where fairseq would ignore the value or fail on it)",
            "ours": "the plugin's own models only"}


def markdown(package="fairseq_fixes"):
    """One table: each patch, its kind, what it acts on, and what it wraps or replaces."""
    rows = ["| patch | kind | acts on | wraps or replaces |", "|---|---|---|---|"]
    for kind, patches in by_kind(package).items():
        rows += [f"| `{p.name}` | {kind} | {p.acts_on} | {', '.join(f'`{t}`' for t in p.targets) or 'nothing'} |"
                 for p in patches]
    return "\n".join(rows)


def listing(package="fairseq_fixes"):
    """Each kind's patches, one a line, with what it acts on and what it changes."""
    lines = []
    for kind, patches in by_kind(package).items():
        if patches:
            lines.append(f"{len(patches)} {HEADINGS[kind]}:")
            for p in patches:
                lines += [f"  {p.name}: {p.acts_on}", f"      wraps or replaces {', '.join(p.targets) or 'nothing'}"]
    return "\n".join(lines)


def main(argv=None, description=__doc__.split("\n\n")[0], package="fairseq_fixes"):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--markdown", action="store_true", help="one table, as docs/fairseq_patches.md has it")
    args = parser.parse_args(argv)
    print(markdown(package) if args.markdown else listing(package))


if __name__ == "__main__":
    main()
