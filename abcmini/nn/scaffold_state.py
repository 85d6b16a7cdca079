"""What a stored ABC scaffold may hold (``scaffolds.scaffold_from_state``'s input, as bias files and
checkpoints keep it), checked field by field before anything is built from it: a file from
elsewhere fails here with the field it gets wrong, never later inside a forward pass.
"""

import math

import torch

MAX_CELLS = 1 << 22  # cells of one value table: far beyond any calibration (pad 64: 3 × 8 × 260)


class ScaffoldStateError(ValueError):
    """``FIELD: problem``, the field named by its path in the state (``bias.cross.values``)."""


def check_scaffold_state(state, heads: int, parts: int | None, where: str = "bias") -> None:
    """``state`` is one bias for every layer, one per layer, or block lines, for a model of
    ``heads`` heads whose inputs have ``parts`` segments (None: any number, as multiadd's)."""
    if not isinstance(state, dict):
        raise ScaffoldStateError(f"{where}: a table of fields, not {type(state).__name__}")
    if "blocks" in state:
        blocks = field(state, "blocks", dict, where)
        for name in ("self", "cross"):
            check_block_lines(
                field(blocks, name, dict, f"{where}.blocks"), heads, f"{where}.{name}"
            )
    elif "layers" in state:
        layers = field(state, "layers", list, where)
        if not layers:
            raise ScaffoldStateError(f"{where}.layers: empty")
        for index, layer in enumerate(layers):
            check_scaffold_state(layer, heads, parts, f"{where}.layers[{index}]")
    else:
        for name in ("self", "cross"):
            check_line_bias(field(state, name, dict, where), heads, parts, f"{where}.{name}")


def check_line_bias(state: dict, heads: int, parts: int | None, where: str) -> None:
    """``LineBias.state()``: a value table ``[directions heads lines]`` and one Δ, first line and
    (anchored) segment per direction."""
    deltas = integers(field(state, "deltas", list, where), f"{where}.deltas")
    firsts = integers(field(state, "firsts", list, where), f"{where}.firsts")
    values = table(state, 3, where)
    if not len(deltas) == len(firsts) == values.shape[0]:
        raise ScaffoldStateError(
            f"{where}: {len(deltas)} deltas, {len(firsts)} firsts and {values.shape[0]} value "
            "tables; they must be as many"
        )
    if any(abs(delta) > 1 for delta in deltas):
        raise ScaffoldStateError(f"{where}.deltas: directions are -1, 0 and 1, not {deltas}")
    heads_of(values, 1, heads, where)
    for name in ("right", "transparent_empty"):
        field(state, name, bool, where)
    for name in ("anchored", "verticals_right", "open_corner"):
        if name in state:
            field(state, name, bool, where)
    closed = state.get("closed", -math.inf)
    if type(closed) not in (int, float) or math.isnan(closed) or closed > 0:
        raise ScaffoldStateError(f"{where}.closed: a number at most 0 (or -inf), not {closed!r}")
    if state.get("anchored"):
        segments = integers(field(state, "segments", list, where), f"{where}.segments")
        if len(segments) != len(deltas):
            raise ScaffoldStateError(f"{where}.segments: one per direction ({len(deltas)})")
        limit = parts if parts is not None else math.inf
        if any(not 0 <= segment < limit for segment in segments):
            raise ScaffoldStateError(
                f"{where}.segments: {segments} are not segments of this task's input "
                f"(0 … {parts - 1 if parts else '…'})"
            )


def check_block_lines(state: dict, heads: int, where: str) -> None:
    """``BlockLines.state()``: a value table ``[heads d ℓ]`` and its first ``d`` and ``ℓ``."""
    heads_of(table(state, 3, where), 0, heads, where)
    for name in ("d_first", "l_first"):
        integers([field(state, name, int, where)], f"{where}.{name}")
    field(state, "cross", bool, where)
    if "products" in state:
        field(state, "products", bool, where)


def field(state: dict, name: str, kind: type, where: str):
    if name not in state:
        raise ScaffoldStateError(f"{where}: no {name!r} field")
    value = state[name]
    if kind is list and isinstance(value, tuple):
        value = list(value)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ScaffoldStateError(f"{where}.{name}: a {kind.__name__}, not {type(value).__name__}")
    return value


def integers(values: list, where: str) -> list[int]:
    if any(type(v) is not int or abs(v) > MAX_CELLS for v in values):
        raise ScaffoldStateError(f"{where}: whole numbers, not {values[:8]!r}")
    return values


def table(state: dict, rank: int, where: str) -> torch.Tensor:
    """The state's ``values``: a real floating-point tensor of ``rank`` dimensions, at most
    ``MAX_CELLS`` cells, each finite or −inf."""
    values = field(state, "values", torch.Tensor, where)
    if not values.is_floating_point():
        raise ScaffoldStateError(f"{where}.values: real floating point, not {values.dtype}")
    if values.dim() != rank or 0 in values.shape:
        raise ScaffoldStateError(
            f"{where}.values: {rank} non-empty dimensions, not shape {list(values.shape)}"
        )
    if values.numel() > MAX_CELLS:
        raise ScaffoldStateError(f"{where}.values: {values.numel():,} cells, at most {MAX_CELLS:,}")
    if torch.isnan(values).any() or (values == math.inf).any():
        raise ScaffoldStateError(f"{where}.values: NaN or +inf (a line is a number or -inf)")
    return values


def heads_of(values: torch.Tensor, dim: int, heads: int, where: str) -> None:
    if values.shape[dim] != heads:
        raise ScaffoldStateError(
            f"{where}.values: {values.shape[dim]} heads (shape {list(values.shape)}); the model has {heads}"
        )
