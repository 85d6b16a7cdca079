"""Figures a person reads: every label and the colorbar inside the picture, and a scale that says
what a mask's values are."""

import pytest

from abcmini.nn.windows import Window
from abcmini.outputs.figures import bias_figures, close


@pytest.mark.parametrize("kind", ["bias/cross", "bias/self"])
def test_an_abs_window_image_keeps_its_labels_and_colorbar_inside_and_names_its_one_value(kind):
    figure = bias_figures(Window(1), 8, "$0000123+0000456", "successor +w=1")[kind]
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    width, height = figure.bbox.width, figure.bbox.height
    for ax in figure.axes:
        box = ax.get_tightbbox(renderer)
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height, (
            ax,
            box,
            width,
        )
    colorbar = figure.axes[-1]
    assert [tick.get_text() for tick in colorbar.get_yticklabels()] == [
        "0"
    ]  # open: 0; closed cells are grey, off the scale
    close(figure)


def test_each_heads_panel_shows_its_own_map_and_closed_cells_grey():
    import matplotlib
    import torch

    from abcmini.outputs.figures import CLOSED, heatmap_grid

    maps = torch.arange(5 * 3 * 7, dtype=torch.float).reshape(5, 3, 7)
    maps[2, 1, :4] = float("-inf")
    figure = heatmap_grid(maps, "five heads", "row", "column", cols=2)
    (image,) = figure.axes[0].get_images()
    mosaic = torch.from_numpy(image.get_array()).float()
    bar = figure.axes[-1]  # the colorbar: the scale the panels are drawn in
    assert bar.get_ylim() == (0, 104)
    cmap, norm = bar.collections[0].cmap, matplotlib.colors.Normalize(0, 104)
    panels = [text.get_text() for text in figure.axes[0].texts]
    assert panels == [f"head {h}" for h in range(5)]
    filled = (mosaic[..., 3] > 0).sum().item()
    assert filled == 5 * 3 * 7  # five panels of 3 × 7 cells, nothing else drawn
    rows, cols = (sorted(set(at.tolist())) for at in torch.nonzero(mosaic[..., 3] > 0).T)
    for h in range(5):
        top, left = rows[3 * (h // 2)], cols[7 * (h % 2)]
        panel = mosaic[top : top + 3, left : left + 7]
        expected = torch.from_numpy(cmap(norm(maps[h].clamp(min=0).numpy()))).float()
        expected[~torch.isfinite(maps[h])] = torch.tensor(matplotlib.colors.to_rgba(CLOSED))
        assert torch.allclose(panel, expected), h
    close(figure)
