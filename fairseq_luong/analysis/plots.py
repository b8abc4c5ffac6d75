"""PNG figures for Luong et al. (2015)'s analyses, with matplotlib's Agg backend (no
display needed): learning curves (Fig. 5), BLEU by sentence length (Fig. 6) and
attention heat maps (Fig. 7)."""
import logging
import os
import re
import warnings
from typing import Iterable, Iterator, List, Optional, Sequence, Set, Tuple

logging.getLogger("matplotlib").setLevel(logging.WARNING)  # fairseq's logging setup lets its DEBUG through
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.patches as patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

logger = logging.getLogger(__name__)


def _save(fig, path: str) -> str:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(path, dpi=120, bbox_inches="tight")
    plt.close(fig)
    return path


def _dress(ax, xlabel: str, ylabel: str, log_y: bool = False) -> None:
    """The axes of every line plot here: labels, optional log y, a light grid, the legend."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if log_y:
        ax.set_yscale("log")
    ax.grid(True, alpha=0.3)
    ax.legend()


Series = Sequence[Tuple]  # (name, xs, ys) per line, or (name, xs, ys, matplotlib's plot keywords)


def plot_panels(panels: Sequence[Tuple[str, str, Series, bool]], path: str, title: str = "") -> str:
    """Side by side, one panel per (xlabel, ylabel, series, log_y): a line per series."""
    fig, axes = plt.subplots(1, len(panels), figsize=(6.5 * len(panels), 4.5), squeeze=False)
    for ax, (xlabel, ylabel, lines, log_y) in zip(axes[0], panels):
        for name, xs, ys, *style in lines:
            ax.plot(xs, ys, **{"marker": "o" if len(xs) <= 30 else None, "markersize": 3, "label": name,
                               **(style[0] if style else {})})
        if all(float(x).is_integer() for _, xs, *_ in lines for x in xs):  # epochs, updates: no 2.5
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _dress(ax, xlabel, ylabel, log_y)
    if title:
        fig.suptitle(title)
    return _save(fig, path)


def plot_curves(series: Series, path: str, xlabel: str, ylabel: str, title: str = "", log_y: bool = False,
                extra: Series = (), extra_ylabel: str = "") -> str:
    """One line per (name, xs, ys); ``extra`` series (e.g. training loss) on a second panel."""
    panels = [(xlabel, ylabel, series, log_y)] + ([(xlabel, extra_ylabel, extra, False)] if extra else [])
    return plot_panels(panels, path, title)


def plot_bleu_by_length(bucket_labels: List[str], systems: Sequence[Tuple[str, List[Optional[float]]]],
                        path: str, title: str = "") -> str:
    """BLEU per source-length bucket, one line per system (Fig. 6)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = list(range(len(bucket_labels)))
    for name, scores in systems:
        points = [(x, s) for x, s in zip(xs, scores) if s is not None]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=name)
    ax.set_xticks(xs)
    ax.set_xticklabels(bucket_labels)
    _dress(ax, "source sentence length (words)", "BLEU")
    if title:
        ax.set_title(title)
    return _save(fig, path)


def covering_families(chars: Set[str], fonts: Iterable[Tuple[str, Set[int]]]) -> Optional[List[str]]:
    """The font families to draw ``chars`` with, or None when the fonts together lack one.

    ``fonts``: (family, code points) pairs, the default font first. The default comes first,
    then only the fonts that hold characters the ones before lack: matplotlib falls back from
    one family of the list to the next glyph by glyph (a SentencePiece "▁" from DejaVu Sans, the
    kana and kanji from IPAexGothic, which has no "▁")."""
    missing, chosen = set(chars), []
    for family, charmap in fonts:
        has = {c for c in missing if ord(c) in charmap}
        if has or not chosen:
            chosen.append(family)
            missing -= has
        if not missing:
            return chosen
    return None


# Families that carry Japanese/Chinese glyphs (checked against their character maps before
# use). Not every font: matplotlib's own "Last Resort" font maps every character to a box.
CJK_FAMILIES = re.compile(r"CJK|Gothic|Mincho|Han Sans|Han Serif|\bJP\b|WenQuanYi|Droid Sans Fallback|"
                          r"Hiragino|Meiryo|IPA|Takao|Unifont|Sarasa|AR PL", re.IGNORECASE)


def _add_packaged_japanese_font() -> None:
    """Make the IPAexGothic of the pip package ``matplotlib-fontja`` (requirements.txt)
    known to matplotlib, so that Japanese words are drawn as Japanese without a system font;
    matplotlib's default font stays the default."""
    try:
        import matplotlib_fontja
    except ImportError:  # not installed: the system's fonts are searched as before
        return
    path = matplotlib_fontja.get_font_ttf_path()
    if os.path.exists(path) and path not in {f.fname for f in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(path)


def _installed_fonts() -> Iterator[Tuple[str, Set[int]]]:
    """(family, code points) of matplotlib's default font ("sans-serif"), then of the
    installed fonts whose family names one with CJK glyphs (the packaged IPAexGothic
    among them), read lazily."""
    from matplotlib.ft2font import FT2Font

    _add_packaged_japanese_font()

    default = font_manager.findfont(font_manager.FontProperties(family=["sans-serif"]))
    candidates = [(default, "sans-serif")] + [
        (f.fname, f.name) for f in font_manager.fontManager.ttflist
        if CJK_FAMILIES.search(f.name)
    ]
    seen = set()
    for path, family in candidates:
        if path in seen:
            continue
        seen.add(path)
        try:
            charmap = set(FT2Font(path).get_charmap())
        except (OSError, RuntimeError, ValueError):  # an unreadable font file: skip it
            continue
        yield family, charmap


_warned_about: Set[str] = set()


def label_font(labels: Sequence[str], fonts: Optional[Iterable[Tuple[str, Set[int]]]] = None) -> Optional[List[str]]:
    """The font families to draw ``labels`` with (covering_families), or None if the installed
    fonts do not hold them all.

    Japanese or Chinese words (perSPE, KFTT, ASPEC) are outside matplotlib's DejaVu Sans: the
    installed fonts that have them follow it; without one they are drawn as boxes, and ONE
    warning says which font to install (instead of matplotlib's warning per character)."""
    chars = {c for label in labels for c in label if not c.isspace()}
    family = covering_families(chars, _installed_fonts() if fonts is None else fonts)
    if family is None:
        wide = "".join(sorted(c for c in chars if ord(c) > 0x2E7F)) or "".join(sorted(chars))
        if wide[:1] not in _warned_about:
            _warned_about.add(wide[:1])
            logger.warning(
                "no installed font has all the characters of the heat map's words (%r...): they "
                "are drawn as boxes; install a font that has them (Japanese: `pip install "
                "matplotlib-fontja`, in requirements.txt; Chinese: Debian/Ubuntu `apt install fonts-noto-cjk`) "
                "and rerun", wide[:8])
    return family


def plot_attention(weights, source: List[str], target: List[str], path: str, title: str = "",
                   windows: Optional[List[Tuple[int, int]]] = None,
                   centres: Optional[List[float]] = None, gold: Optional[set] = None) -> str:
    """A heat map of ``weights`` (len(target) x len(source), rows = target words).

    ``windows``: per target row the first and last source position of a local window,
    drawn as an outline; ``centres``: per row p_t, drawn as a dot; ``gold``: (source,
    target) links drawn as crosses (Fig. 7's gold alignment panel).
    """
    rows, cols = len(target), len(source)
    fig, ax = plt.subplots(figsize=(max(4.0, 0.45 * cols + 2), max(3.0, 0.4 * rows + 1.5)))
    image = ax.imshow(weights, cmap="Greys", vmin=0.0, vmax=1.0, aspect="auto", interpolation="nearest")
    family = label_font(list(source) + list(target))
    ax.set_xticks(range(cols))
    ax.set_xticklabels(source, rotation=90, fontfamily=family or "sans-serif")
    ax.set_yticks(range(rows))
    ax.set_yticklabels(target, fontfamily=family or "sans-serif")
    ax.xaxis.tick_top()
    for t, window in enumerate(windows or []):
        if window is None:
            continue
        first, last = window
        ax.add_patch(patches.Rectangle((first - 0.5, t - 0.5), last - first + 1, 1.0, fill=False,
                                       edgecolor="tab:red", linewidth=1.2))
    if centres:
        ax.plot(centres, range(len(centres)), "o", color="tab:blue", markersize=3, label="p_t")
        ax.legend(loc="lower right", fontsize="small")
    for s, t in sorted(gold or ()):
        ax.plot(s, t, "x", color="tab:orange", markersize=6)
    fig.colorbar(image, ax=ax, fraction=0.04)
    if title:
        ax.set_xlabel(title)
    with warnings.catch_warnings():
        if family is None:  # said once by label_font; not again for every character
            warnings.filterwarnings("ignore", message="Glyph .* missing from font")
        return _save(fig, path)
