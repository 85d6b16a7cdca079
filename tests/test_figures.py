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
