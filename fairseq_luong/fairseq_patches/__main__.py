"""``python -m fairseq_luong.fairseq_patches``: every patch of fairseq, by kind, with what it acts on
(``--markdown``: the table of docs/fairseq_patches.md)."""
import argparse

from . import by_kind

HEADINGS = {"fix": "fixes of fairseq (every fairseq model; its own results unchanged where fairseq worked)",
            "check": "checks (one line, only where fairseq would ignore the value or fail on it)",
            "ours": "the plugin's own models only"}


def markdown():
    rows = ["| patch | kind | acts on |", "|---|---|---|"]
    for kind, patches in by_kind().items():
        rows += [f"| `{p.name}` | {kind} | {p.acts_on} |" for p in patches]
    return "\n".join(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true", help="one table, as docs/fairseq_patches.md has it")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return
    for kind, patches in by_kind().items():
        print(f"{len(patches)} {HEADINGS[kind]}:")
        for p in patches:
            print(f"  {p.name}: {p.acts_on}")


if __name__ == "__main__":
    main()
