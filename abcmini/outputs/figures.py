"""Figures: per-head heatmaps of attention and biases, accuracy-vs-length curves.

Every function returns a matplotlib ``Figure`` (headless ``Agg`` backend) that the caller saves
as a PNG and/or hands to the tracker, then closes with ``close``.
"""

import math
import os
import tempfile

# matplotlib's font cache in the temporary folder unless the user placed it: never under HOME
os.environ.setdefault("MPLCONFIGDIR", os.path.join(tempfile.gettempdir(), "abcmini-matplotlib"))
import matplotlib  # noqa: E402

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from einops import rearrange  # noqa: E402

from abcmini.nn.calibrate import average_attention  # noqa: E402
from abcmini.nn.lines import segments_of  # noqa: E402
from abcmini.nn.scaffolds import stacked  # noqa: E402
from abcmini.store import atomic_write, note_written  # noqa: E402
from abcmini.tasks import Example, detokenize, digit_mask  # noqa: E402

CLOSED = "#d0d0d0"  # colour of −inf (closed) cells: visibly not part of the colour scale


def heatmap_grid(
    maps: torch.Tensor,
    title: str,
    row_label: str,
    col_label: str,
    col_tokens: str | None = None,
    colorbar_label: str = "",
    names: list[str] | None = None,
    cols: int | None = None,
) -> plt.Figure:
    """One heatmap per head of ``maps [h q k]``; −inf cells are drawn grey, outside the scale.

    ``col_tokens`` (one character per column, e.g. the input ``$0123``) labels the columns;
    ``names`` the panels (default ``head 0``, ``head 1``, …); ``cols`` panels to a row (default:
    four, two for wide panels). The panels are one image on one pair of axes, labelled along
    the bottom and left edges: a tick is costly to draw, an image cell is not.
    """
    maps = maps.detach().float().cpu()
    heads, q, k = maps.shape
    cols = cols or min(heads, 4 if k / q <= 2 else 2)  # a grid: wide panels two to a row
    rows = math.ceil(heads / cols)
    finite = maps[torch.isfinite(maps)]
    low, high = (finite.min().item(), finite.max().item()) if finite.numel() else (0.0, 1.0)
    one_value = low == high  # e.g. an ABS window, 0 where open: a scale of that one value
    if one_value:
        low, high = low - 0.5, high + 0.5
    norm = matplotlib.colors.Normalize(low, high)
    cmap = plt.get_cmap("viridis")
    colours = torch.from_numpy(cmap(norm(maps.clamp(low, high).numpy()))).float()
    colours[~torch.isfinite(maps)] = torch.tensor(matplotlib.colors.to_rgba(CLOSED))
    gap_q, gap_k = max(1, round(0.3 * q)), max(1, round(0.15 * k))  # room for a panel's title
    panels = F.pad(colours, (0, 0, 0, gap_k, gap_q, 0, 0, rows * cols - heads))  # transparent
    mosaic = rearrange(panels, "(r c) q k rgba -> (r q) (c k) rgba", c=cols)[:, :-gap_k]
    aspect = min(max(k / q, 1.0), 2.0)
    fig, ax = plt.subplots(figsize=(max(2.6 * cols * aspect + 1.2, 5.5), 2.6 * rows + 0.8))
    fig.subplots_adjust(left=0.1, right=0.8, bottom=0.14, top=0.85)
    ax.imshow(mosaic.numpy(), aspect="auto", interpolation="nearest")
    ax.set_frame_on(False)
    for h in range(heads):
        top, left = (h // cols) * (q + gap_q) + gap_q, (h % cols) * (k + gap_k)
        ax.add_patch(plt.Rectangle((left - 0.5, top - 0.5), k, q, fill=False, lw=0.6))
        ax.text(
            left + k / 2,
            top - 0.6,
            names[h] if names else f"head {h}",
            ha="center",
            va="bottom",
            fontsize=9,
        )
    shown_cols = range(min(cols, heads))
    if col_tokens is not None and len(col_tokens) <= 40:
        x_ticks, x_labels = list(range(k)), list(col_tokens)
    else:
        x_ticks = list(range(0, k, max(1, math.ceil(k / 5))))
        x_labels = [str(i) for i in x_ticks]
    y_ticks = list(range(0, q, max(1, math.ceil(q / 4))))
    ax.set_xticks(
        [c * (k + gap_k) + i for c in shown_cols for i in x_ticks], x_labels * len(shown_cols)
    )
    ax.set_yticks(
        [r * (q + gap_q) + gap_q + i for r in range(rows) for i in y_ticks],
        [str(i) for i in y_ticks] * rows,
    )
    ax.tick_params(labelsize=6, length=2)
    ax.set_xlabel(col_label, fontsize=8)
    ax.set_ylabel(row_label, fontsize=8)
    bar = fig.colorbar(
        matplotlib.cm.ScalarMappable(norm, cmap),
        cax=fig.add_axes([0.84, 0.15, 0.02, 0.65]),
        label=colorbar_label or None,
    )
    if one_value:
        bar.set_ticks([(low + high) / 2])
    fig.suptitle(
        f"{title}  (grey: −inf, closed)" if not torch.isfinite(maps).all() else title, fontsize=10
    )
    return fig


def accuracy_curves(curves: dict[str, dict[int, float]], title: str) -> plt.Figure:
    """Exact match (%) against operand length, one line per method (the paper's Figure 1)."""
    fig, ax = plt.subplots(figsize=(6, 3.8), constrained_layout=True)
    styles = [("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", "-"), ("x", "--")]
    for (method, points), (marker, line) in zip(sorted(curves.items()), styles * len(curves)):
        lengths = sorted(points)  # distinct markers and dashes: overlapping curves stay visible
        ax.plot(
            lengths,
            [100 * points[n] for n in lengths],
            marker=marker,
            linestyle=line,
            label=method,
            alpha=0.85,
        )
    ax.set_xlabel("operand length (digits)")
    ax.set_ylabel("exact match (%)")
    ax.set_ylim(-3, 103)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def save(fig: plt.Figure, path: str) -> str:
    atomic_write(path, lambda f: fig.savefig(f, dpi=110, format="png"))
    return path


def close(fig: plt.Figure) -> None:
    plt.close(fig)


# ---------------------------------------------------------------- figures of a model

ROWS = "output digit (least significant first)"


def attention_figures(model, examples: dict[int, Example], title: str) -> dict[str, plt.Figure]:
    """Every decoder layer's cross- and self-attention, every head (a row per layer), for the
    one input of each ``examples[length]``: where the model attends at a training length beside
    test lengths. Keys ``attention/L-digits/cross`` and ``…/self``."""
    figures = {}
    for length, one in examples.items():
        self_maps, cross_maps = average_attention(
            model, one, one.tgt_out.shape[1], layers=tuple(range(model.cfg.dec_layers))
        )
        layers, heads = self_maps.shape[:2]
        names = [f"layer {layer} · head {head}" for layer in range(layers) for head in range(heads)]
        tokens = detokenize(one.src[0])
        shown = tokens if len(tokens) <= 40 else f"{tokens[:18]}…{tokens[-18:]}"
        for kind, maps, columns in (
            ("cross", cross_maps, "input token"),
            ("self", self_maps, "output position read"),
        ):
            figures[f"attention/{length}-digits/{kind}"] = heatmap_grid(
                rearrange(maps, "l h q k -> (l h) q k"),
                f"{title}: {kind}-attention, {length}-digit input {shown}",
                ROWS,
                columns,
                tokens if kind == "cross" else None,
                "probability",
                names,
                cols=heads,
            )
    return figures


def bias_figures(bias, n_q: int, src_tokens: str, title: str) -> dict[str, plt.Figure]:
    """A scaffold (ABS window or ABC bias) materialized for one geometry, per head."""
    layout = segments_of(torch.tensor([token.isdigit() for token in src_tokens]))
    self_bias, cross_bias = stacked(bias, n_q, len(src_tokens), layout)
    return {
        "bias/cross": heatmap_grid(
            cross_bias, f"{title}: cross-attention bias", ROWS, "input token", src_tokens, "bias"
        ),
        "bias/self": heatmap_grid(
            self_bias, f"{title}: self-attention bias", ROWS, "output position read", None, "bias"
        ),
    }


def calibration_figures(
    directory: str, task: str, self_avg, cross_avg, calibrated, example, layers=(-1,)
) -> dict[str, str]:
    """PNG heatmaps per head, written to ``directory/abc_<name>.png``: the averaged attention
    ``Ā [layers h q k]`` (trusted rows) of the calibrated ``layers`` and the bias at the
    calibration geometry, cross and self."""
    tokens = detokenize(example.src[0])
    self_bias, cross_bias = stacked(
        calibrated,
        example.tgt_out.shape[1],
        len(tokens),
        segments_of(digit_mask(example.src[0])),
    )
    names = (
        [f"layer {layer} head {h}" for layer in layers for h in range(self_avg.shape[1])]
        if len(layers) > 1
        else None
    )
    self_avg, cross_avg = (rearrange(a, "l h q k -> (l h) q k") for a in (self_avg, cross_avg))
    figures = {
        "attention_cross": heatmap_grid(
            cross_avg,
            f"{task}: averaged cross-attention Ā (trusted rows)",
            ROWS,
            "input position",
            None,
            "probability",
            names,
        ),
        "attention_self": heatmap_grid(
            self_avg,
            f"{task}: averaged self-attention Ā (trusted rows)",
            ROWS,
            "output position read",
            None,
            "probability",
            names,
        ),
        "bias_cross": heatmap_grid(
            cross_bias, f"{task}: ABC cross-attention bias", ROWS, "input position", None, "bias"
        ),
        "bias_self": heatmap_grid(
            self_bias,
            f"{task}: ABC self-attention bias",
            ROWS,
            "output position read",
            None,
            "bias",
        ),
    }
    paths = {}
    for name, fig in figures.items():
        note_written(directory, f"abc_{name}.png")
        paths[name] = save(fig, os.path.join(directory, f"abc_{name}.png"))
        close(fig)
    return paths
