"""What every ABC scaffold shares: one from its stored state, its open lines as a record keeps
them, and its biases per decoder layer (``Calibrated``: one pair for every layer; ``PerLayer``: a
list, one per layer)."""

import torch

from abcmini.nn.block_lines import BlockCalibrated
from abcmini.nn.lines import Calibrated, PerLayer


def scaffold_from_state(state: dict) -> Calibrated | PerLayer | BlockCalibrated:
    """The ABC scaffold a bias file or checkpoint stores: one bias for every layer, one per layer,
    or block lines."""
    if "blocks" in state:
        return BlockCalibrated.from_state(state)
    if "layers" in state:
        return PerLayer(tuple(Calibrated.from_state(layer) for layer in state["layers"]))
    return Calibrated.from_state(state)


def open_lines(scaffold: Calibrated | PerLayer | BlockCalibrated) -> list[str]:
    """Every open line of an ABC scaffold, one ``"layer 0 cross Δ = -1, segment 1 h2: 0,1"`` per
    attention, direction (and segment) and head: what a result record keeps of its bias."""
    return [
        f"{name} {label} h{head}: " + ",".join(str(line) for line, _ in lines)
        for name, table in scaffold.tables()
        for label, head, lines in table.lines()
    ]


def line_rows(scaffold: Calibrated | PerLayer | BlockCalibrated) -> list[tuple]:
    """``(layer, attention, direction, head, line, value)`` for every open line of an ABC
    scaffold (layer ``every`` where one bias serves all layers): the bias as a table. A line is
    text (``-1``, or a block's ``marker``), so that a column holds one type."""
    rows = []
    for name, table in scaffold.tables():
        layer, _, attention = name.rpartition(" ")  # "layer 0 cross" or "cross"
        for label, head, lines in table.lines():
            rows += [
                (layer.removeprefix("layer ") or "every", attention, label, head, str(line), value)
                for line, value in lines
            ]
    return rows


def per_layer(biases, depth: int) -> list[tuple]:
    """A scaffold's output as one ``(self_bias, cross_bias)`` pair per decoder layer."""
    if isinstance(biases, list):
        if len(biases) != depth:
            raise ValueError(
                f"a per-layer scaffold for {len(biases)} decoder layers on a model with {depth}"
            )
        return biases
    return [biases] * depth


def stacked(biases) -> tuple[torch.Tensor, torch.Tensor]:
    """A scaffold's output as one ``(self [(layers h) q k], cross)`` pair, layers one after another (figures)."""
    if not isinstance(biases, list):
        return biases
    return tuple(torch.cat([pair[kind] for pair in biases]) for kind in (0, 1))
