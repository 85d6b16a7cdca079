"""What every scaffold shares: an ABC one from its stored state, its open lines as a record keeps
them, and its biases per decoder layer (``per_layer``: one pair for every layer, or
``PerLayer``'s one per layer)."""

import torch
from torch import nn

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


def layer_biases(
    scaffold: nn.Module, n_q: int, n_src: int, layout=None, depth: int | None = None, device=None
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """``(self_bias [h q q], cross_bias [h q s])`` of a scaffold for each of ``depth`` decoder
    layers (None: as many as it has) for an ``n_q``-token output and ``n_src``-token input: each
    bias called with the rows and keys of its matrix, a pair that serves several layers built once."""
    rows, keys = torch.arange(n_q, device=device), torch.arange(n_src, device=device)
    pairs, built = scaffold.per_layer(depth), {}
    for pair in pairs:
        if id(pair) not in built:
            built[id(pair)] = (
                pair.self_attention(rows, rows, layout),
                pair.cross_attention(rows, keys, layout),
            )
    return [built[id(pair)] for pair in pairs]


def stacked(
    scaffold: nn.Module, n_q: int, n_src: int, layout=None
) -> tuple[torch.Tensor, torch.Tensor]:
    """A scaffold's ``(self [(layers h) q k], cross)``, its layers one after another (figures)."""
    pairs = layer_biases(scaffold, n_q, n_src, layout)
    return tuple(torch.cat([pair[kind] for pair in pairs]) for kind in (0, 1))
