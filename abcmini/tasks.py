"""The four arithmetic tasks of the paper: vocabulary, formatting, data pools, test sets.

Numbers are kept as digit tensors (``[n, width]``, most significant digit first) from the
start, so a 60-digit operand is as easy as a 6-digit one and nothing overflows int64.
Every operation below is vectorized over the batch; Python loops run over digit positions
only (carry propagation, halving), never over samples.

Sequence layout (paper §3.3, DESIGN.md §2), for pad width ``P``:

- ``src``: operands left-padded with ``0`` to ``P`` digits after a ``$``, e.g. ``$0123+0748``.
  Every input starts with a marker (``$``, or the operator that starts an aligned binary
  input): with windowed attention (ABS) or a calibrated bias (ABC) and no positional encoding,
  that boundary is the only thing telling the final-carry row from the EOS row. Without it,
  N×1 with multiplier 0 cannot end: both rows read only zeros (ABC: 0% for b = 0).
- ``tgt``: the result zero-padded to ``P + 1`` digits and reversed (least significant first),
  so ``$0123+0748`` gives ``18700``. ``P + 1`` digits always hold the result (999+999, 999*9).
- ``Form.reversed`` writes every operand least significant digit first (``$3210+8470``); the
  target is the same.
- ``Form.hints`` (Zhou et al. 2024, "Transformers Can Achieve Length Generalization But Not
  Robustly", index hints): a hint token before every digit of the prompt and the answer naming
  the digit's significance, the same hint for the same place in every number; ``Form.hints``
  symbols in all. Training starts each example's hints at a random offset, so that every symbol
  is trained; a test starts them at 0. Successor, Addition and N×1 only.
- Parity works on the binary form of the number: ``P`` decimal digits become
  ``bits(10^P - 1)`` binary digits; the seq2seq target is the running xor from the least
  significant bit (its last token is the parity), the classification target is one token.
- The decoder reads ``[SOS] + tgt`` and is trained to emit ``tgt + [EOS]``.
- Multi-operand addition (``multiadd``) is a scratchpad of running sums, one *block* per operand:
  ``$a_1+a_2+…+a_k`` (each operand in ``P`` digits) → ``s_1+s_2+…+s_k`` with ``s_m = s_{m−1} + a_m``
  (``s_1 = a_1``), each ``s_m`` in ``P + 2`` digits, reversed. Every block is a two-operand
  addition ABC already extrapolates; ``s_k`` is the answer. The input ends with ``&``: the last
  block's next marker, distinct from every ``+``. ``$0012+0340+0005&`` → ``210000+253000+803000``.
- N×M multiplication (``multiply``) is a scratchpad of running sums too, one block per digit of
  ``b``: ``$a*b&`` (both in ``P`` digits) → ``s_0+s_1+…+s_{P−1}`` with ``s_j = s_{j−1} + a·b_j·10^j``
  (``b_j`` the digit of significance ``j``), reversed, ``s_j`` in ``P + j + 1`` digits (it is
  below ``10^(P+j+1)``), so every block ends one row above its last digit of ``a``;
  ``s_{P−1} = a·b``. A row of block ``j`` adds one digit product ``a_{i−j}·b_j`` to the previous
  block's digit. Every block ends with ``+``, the last one too: the end comes in the row where
  ``b`` has no digit left, as a block of its own. ``$12*34&`` (``P`` 2) → ``840+8040+``:
  ``s_0 = 48``, ``s_1 = 408``.
"""

from dataclasses import dataclass

import torch
from einops import rearrange, repeat

from abcmini.config import POOL_DIGITS, Form
from abcmini.errors import UserError
from abcmini.names import check_task
from abcmini.nn.lines import segments_of
from abcmini.nn.positions import significance

VOCAB = "0123456789+*$&@"
PLUS, TIMES, SOS, EOS, PAD = (VOCAB.index(c) for c in "+*$&@")
HINT = len(VOCAB)  # index hint k is token HINT + k (Form.hints)
LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
POOL_SIZE = 2**20 + 1  # the paper's permutation of [0, 2^20]
OPERANDS = 5  # multiadd: a training example adds 2 … 5 operands
BLOCK_TASKS = ("multiadd", "multiply")  # scratchpads of blocks: the answer is the last block
SUM_EXTRA = 2  # multiadd: a running sum has 2 digits more than its operands (up to 100 operands)


def hint_text(k: int) -> str:
    """Index hint ``k`` as one character, as Zhou et al. write hints: ``a`` … ``Z``, then the
    letters from U+0100 on (``names.BOUNDS`` keeps ``k`` below the combining marks)."""
    return LETTERS[k] if k < len(LETTERS) else chr(0x100 + k - len(LETTERS))


def detokenize(tokens: torch.Tensor) -> str:
    """A token row as text, one character a token (index hints ``hint_text``)."""
    return "".join(VOCAB[t] if t < HINT else hint_text(t - HINT) for t in tokens.tolist())


def parity_bits(pad_width: int) -> int:
    """Binary width that holds every number of ``pad_width`` decimal digits."""
    return (10**pad_width - 1).bit_length()


def sequence_lengths(
    task: str, pad_width: int, aligned: bool = False, operands: int = OPERANDS
) -> tuple[int, int]:
    """``(encoder input, decoder input)`` lengths of a task's sequences at ``pad_width`` (and
    ``operands`` for multiadd), without building one (what ``format_task`` would give)."""
    check_task(task)
    if task in ("parity", "parity_class"):
        bits = parity_bits(pad_width)
        return bits + 1, (bits if task == "parity" else 1) + 1
    if task == "successor":
        return pad_width + 1, pad_width + 2
    if task == "multiadd":
        return operands * (pad_width + 1) + 1, operands * (pad_width + SUM_EXTRA + 1)
    if task == "multiply":  # block j: P + j + 1 digits and its separator; then the end
        return 2 * pad_width + 3, 3 * pad_width * (pad_width + 1) // 2 + 1
    if aligned:
        return 1 + 2 * pad_width, pad_width + 2
    return pad_width + 2 + (pad_width if task == "addition" else 1), pad_width + 2


def hinted_lengths(task: str, pad_width: int) -> tuple[int, int]:
    """``sequence_lengths`` with index hints: one more token per digit."""
    src, tgt = sequence_lengths(task, pad_width)
    return src + pad_width * (2 if task == "addition" else 1) + (task == "nx1"), tgt + pad_width + 1


def input_parts(task: str) -> int | None:
    """How many segments (``lines.segments_of``) every input of ``task`` has: ``$``, each
    operand, the operator; None where the operand count varies (multiadd)."""
    if task == "multiadd":
        return None
    zeros = torch.zeros(1, 2, dtype=torch.long)
    b = torch.zeros(1, dtype=torch.long) if task == "nx1" else zeros
    return len(segments_of(digit_mask(format_task(task, zeros, b, 2).src[0])))


def digit_mask(tokens: torch.Tensor) -> torch.Tensor:
    """``[… n]`` booleans: which tokens are digits (``0``–``9``; binary digits are ``0`` and ``1``).
    Its ``lines.segments_of`` is an input's layout: ``$``, each operand, the operator."""
    return tokens < 10


# ---------------------------------------------------------------- digit arithmetic


def int_to_digits(x: torch.Tensor, width: int) -> torch.Tensor:
    """``[n]`` int64 → ``[n, width]`` decimal digits, most significant first."""
    powers = 10 ** torch.arange(width - 1, -1, -1, device=x.device)
    return torch.div(rearrange(x, "n -> n 1"), powers, rounding_mode="floor") % 10


def pad_digits(digits: torch.Tensor, width: int) -> torch.Tensor:
    """Left-pad ``[n, w]`` digits with zeros to ``[n, width]``."""
    extra = width - digits.shape[1]
    if extra < 0:
        if digits[:, :-width].any():
            raise ValueError(f"a number has more than {width} digits")
        return digits[:, -width:]
    return torch.nn.functional.pad(digits, (extra, 0))


def add_digits(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Sum of two ``[n, w]`` digit tensors as ``[n, w + 1]`` digits."""
    out = torch.zeros(a.shape[0], a.shape[1] + 1, dtype=torch.long, device=a.device)
    carry = torch.zeros(a.shape[0], dtype=torch.long, device=a.device)
    for i in range(a.shape[1] - 1, -1, -1):
        s = a[:, i] + b[:, i] + carry
        out[:, i + 1], carry = s % 10, s // 10
    out[:, 0] = carry
    return out


def mul_digit(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``[n, w]`` digits times ``[n]`` single digits → ``[n, w + 1]`` digits."""
    out = torch.zeros(a.shape[0], a.shape[1] + 1, dtype=torch.long, device=a.device)
    carry = torch.zeros(a.shape[0], dtype=torch.long, device=a.device)
    for i in range(a.shape[1] - 1, -1, -1):
        s = a[:, i] * b + carry
        out[:, i + 1], carry = s % 10, s // 10
    out[:, 0] = carry
    return out


def digits_to_bits(digits: torch.Tensor, n_bits: int) -> torch.Tensor:
    """Decimal ``[n, w]`` → binary ``[n, n_bits]``, most significant bit first.

    Halving a decimal digit string needs no carry loop: digit ``i`` of ``x // 2`` is
    ``d_i // 2 + 5 * (d_{i-1} mod 2)``.
    """
    bits = []
    for _ in range(n_bits):
        bits.append(digits[:, -1] % 2)
        previous_odd = torch.nn.functional.pad(digits[:, :-1] % 2, (1, 0))
        digits = digits // 2 + 5 * previous_odd
    if digits.any():
        raise ValueError(f"a number needs more than {n_bits} bits")
    return torch.stack(bits[::-1], dim=1)


def running_xor(bits: torch.Tensor) -> torch.Tensor:
    """The paper's parity scratchpad ``y_1 = x_1, y_i = y_{i-1} xor x_i``.

    ``bits`` is most significant first (``x_n … x_1``); the result is ``y_1 … y_n``, i.e.
    already in the reversed (least significant first) output order.
    """
    return bits.flip(1).cumsum(1) % 2


# ---------------------------------------------------------------- task formatting


@dataclass(frozen=True)
class Example:
    """A batch of formatted examples: encoder input, decoder input and decoder target."""

    src: torch.Tensor  # [n, S]
    tgt_in: torch.Tensor  # [n, T]  SOS + result
    tgt_out: torch.Tensor  # [n, T]  result + EOS


def format_task(
    task: str,
    a: torch.Tensor,
    b: torch.Tensor | None,
    pad_width: int,
    form: Form = Form(),
    hint_draw: torch.Generator | None = None,
) -> Example:
    """Format operands (digit tensors ``[n, w]``; ``b`` is ``[n]`` single digits for N×1;
    multiadd's ``a`` is ``[n, k, w]``, its ``k`` operands, and ``b`` is None).

    ``form.aligned`` interleaves the operands of a binary task (ABS input alignment):
    ``a_n…a_1 + b_n…b_1 → + a_n b_n … a_1 b_1`` and ``a_n…a_1 * b → * a_n b … a_1 b``;
    ``form.reversed`` writes each operand (its bits, for Parity) least significant first;
    ``form.hints`` adds index hints, each example's from an offset ``hint_draw`` draws (else 0).
    """
    check_task(task)
    written = (lambda digits: digits.flip(-1)) if form.reversed else (lambda digits: digits)
    if task == "multiadd":
        return _running_sums(a, pad_width, written)
    if task == "multiply":
        return _partial_sums(pad_digits(a, pad_width), pad_digits(b, pad_width), written)
    a = pad_digits(a, pad_width)
    n = a.shape[0]
    if task == "successor":
        src = _with_boundary(written(a))
        result = add_digits(
            a, pad_digits(torch.ones(n, 1, dtype=torch.long, device=a.device), pad_width)
        )
    elif task in ("addition", "nx1"):
        op = torch.full((n, 1), PLUS if task == "addition" else TIMES, device=a.device)
        if task == "addition":
            b = pad_digits(b, pad_width)
            result = add_digits(a, b)
        else:
            result = mul_digit(a, b)
            b = repeat(b, "n -> n p", p=pad_width) if form.aligned else rearrange(b, "n -> n 1")
        a, b = written(a), b if task == "nx1" else written(b)
        if form.aligned:
            src = torch.cat([op, rearrange([a, b], "two n p -> n (p two)")], dim=1)
        else:
            src = torch.cat([_with_boundary(a), op, b], dim=1)
    else:
        bits = digits_to_bits(a, parity_bits(pad_width))
        scratch = running_xor(bits)
        tgt = scratch if task == "parity" else scratch[:, -1:]
        return _with_sos_eos(_with_boundary(written(bits)), tgt)
    if form.hints:
        return _with_hints(src, result.flip(1), form, hint_draw)
    return _with_sos_eos(src, result.flip(1))


def _with_hints(src, tgt, form: Form, draw: torch.Generator | None) -> Example:
    """Prompt and answer with an index hint before every digit (module docstring): hint
    ``HINT + offset + place``, ``place`` the digit's significance in its number. Every row of a
    batch shares one frame, so the same columns take a hint in every row."""
    places = [significance(digit_mask(src), form.reversed), significance(digit_mask(tgt), True)]
    need = max(int(p.max()) for p in places) + 1
    if need > form.hints:
        raise UserError(f"{need}-digit answers need {need} index hints; the run has {form.hints}")
    n = src.shape[0]
    offset = (
        torch.zeros(n, dtype=torch.long)
        if draw is None
        else torch.randint(form.hints - need + 1, (n,), generator=draw)
    )
    offset = rearrange(offset.to(src.device), "n -> n 1")

    def hinted(tokens, place):
        pairs = rearrange([HINT + offset + place, tokens], "two n s -> n (s two)")
        return pairs[:, rearrange([place[0] >= 0, place[0] > -2], "two s -> (s two)")]

    return _with_sos_eos(*(hinted(t, p) for t, p in zip((src, tgt), places)))


def _running_sums(a: torch.Tensor, pad_width: int, written) -> Example:
    """Multiadd's scratchpad (module docstring): ``$a_1+…+a_k&`` → ``s_1+…+s_k`` reversed."""
    n, k, _ = a.shape
    a = rearrange(pad_digits(rearrange(a, "n k w -> (n k) w"), pad_width), "(n k) p -> n k p", k=k)
    marks = torch.full((n, k, 1), PLUS, dtype=torch.long, device=a.device)
    marks[:, 0] = SOS
    width, separator = (
        pad_width + SUM_EXTRA,
        torch.full((n, 1), PLUS, dtype=torch.long, device=a.device),
    )
    total, blocks = torch.zeros(n, width, dtype=torch.long, device=a.device), []
    for m in range(k):
        total = pad_digits(add_digits(total, pad_digits(a[:, m], width)), width)
        blocks.append(torch.cat([total.flip(1), separator], dim=1))
    tgt = rearrange(torch.stack(blocks, dim=1), "n k b -> n (k b)")[:, :-1]
    end = torch.full((n, 1), EOS, dtype=torch.long, device=a.device)
    return _with_sos_eos(
        torch.cat([rearrange(torch.cat([marks, written(a)], dim=2), "n k p -> n (k p)"), end], 1),
        tgt,
    )


def _partial_sums(a: torch.Tensor, b: torch.Tensor, written) -> Example:
    """Multiply's scratchpad (module docstring): ``$a*b&`` → ``s_0+…+s_{P−1}`` reversed."""
    (n, width), device = a.shape, a.device
    total, blocks = torch.zeros(n, 2 * width, dtype=torch.long, device=device), []
    separator = torch.full((n, 1), PLUS, dtype=torch.long, device=device)
    for j in range(width):  # s_j < 10^(P + j + 1): block j holds P + j + 1 digits
        product = pad_digits(
            torch.nn.functional.pad(mul_digit(a, b[:, width - 1 - j]), (0, j)), 2 * width
        )
        total = pad_digits(add_digits(total, product), 2 * width)
        blocks.append(torch.cat([total.flip(1)[:, : width + j + 1], separator], dim=1))
    times, end = torch.full((n, 1), TIMES, device=device), torch.full((n, 1), EOS, device=device)
    return _with_sos_eos(
        torch.cat([_with_boundary(written(a)), times, written(b), end], dim=1),
        torch.cat(blocks, dim=1),
    )


def _with_boundary(digits: torch.Tensor) -> torch.Tensor:
    """``$ d_n … d_1``: a number with its start marked."""
    return torch.cat([torch.full_like(digits[:, :1], SOS), digits], dim=1)


def _with_sos_eos(src: torch.Tensor, tgt: torch.Tensor) -> Example:
    n = src.shape[0]
    sos = torch.full((n, 1), SOS, dtype=torch.long, device=src.device)
    eos = torch.full((n, 1), EOS, dtype=torch.long, device=src.device)
    return Example(src, torch.cat([sos, tgt], 1), torch.cat([tgt, eos], 1))


def mixed(examples: list[Example]) -> Example:
    """Examples of several frames in one batch, as a language model's batches mix lengths: each
    prompt padded with ``PAD`` in front (so every answer starts in one column), each answer and
    target with ``PAD`` behind; the decoder-only model masks the prompt's ``PAD`` and the loss
    skips the target's."""

    def padded(name: str, in_front: bool) -> torch.Tensor:
        rows = [getattr(e, name) for e in examples]
        width = max(t.shape[1] for t in rows)
        sides = lambda t: (width - t.shape[1], 0) if in_front else (0, width - t.shape[1])  # noqa: E731
        return torch.cat([torch.nn.functional.pad(t, sides(t), value=PAD) for t in rows])

    return Example(padded("src", True), padded("tgt_in", False), padded("tgt_out", False))


def padding_cells(tokens: torch.Tensor) -> torch.Tensor:
    """``[n s]`` token rows → where they hold padding: the zeros in front of a number's first
    non-zero digit (a number is a run of digit tokens between markers), never its last digit (the
    number 0 is one real digit). Decoder rows are read reversed (``tgt_in.flip(1)``): their result
    runs least significant first, so its padding trails."""
    digit = tokens <= VOCAB.index("9")
    seen = torch.cumsum(digit & (tokens != VOCAB.index("0")), dim=1)
    before = torch.where(digit, 0, seen).cummax(dim=1).values  # non-zero digits before this number
    last = digit & ~torch.nn.functional.pad(digit[:, 1:], (0, 1), value=False)
    return digit & (seen == before) & ~last


# ---------------------------------------------------------------- data pools


@dataclass(frozen=True)
class Pool:
    """The paper's random permutation of ``[0, 2^20]`` split 7:1 into train / validation."""

    train: torch.Tensor
    valid: torch.Tensor

    @classmethod
    def make(cls, seed: int) -> "Pool":
        perm = torch.randperm(POOL_SIZE, generator=torch.Generator().manual_seed(seed))
        cut = POOL_SIZE * 7 // 8
        return cls(perm[:cut], perm[cut:])


def sample_operands(
    task: str, numbers: torch.Tensor, n: int, generator: torch.Generator, count: int | None = None
):
    """Draw ``n`` examples from a split; binary tasks draw each operand independently, multiadd
    ``count`` of them (default ``operand_draw``: one count for the whole draw, as a batch shares one layout)."""
    count = (count or operand_draw(generator)) if task == "multiadd" else 1
    a = numbers[torch.randint(len(numbers), (n * count,), generator=generator)]
    a = int_to_digits(a, POOL_DIGITS)
    if task == "multiadd":
        return rearrange(a, "(n k) w -> n k w", k=count), None
    if task in ("addition", "multiply"):
        b = int_to_digits(
            numbers[torch.randint(len(numbers), (n,), generator=generator)], POOL_DIGITS
        )
    elif task == "nx1":
        b = torch.randint(10, (n,), generator=generator)
    else:
        b = None
    return a, b


def operand_draw(generator: torch.Generator, fewest: int = 2) -> int:
    """A training draw's operand count, uniform in ``fewest`` … ``OPERANDS``: it varies between
    batches, so that no block can tell it is the last by counting the blocks before it."""
    return int(torch.randint(fewest, OPERANDS + 1, (1,), generator=generator))


def validation_counts(task: str, fewest: int = 2) -> tuple:
    """The operand counts a validation set covers, a part each: multiadd's every training count
    (one draw holds one count), ``(None,)`` for the binary tasks."""
    return tuple(range(fewest, OPERANDS + 1)) if task == "multiadd" else (None,)


def random_numbers(
    n: int, digits: int, generator: torch.Generator, length: int | None = None
) -> torch.Tensor:
    """``[n, digits]`` numbers, most significant digit first, each of a length drawn uniformly
    from 1 … ``digits`` (or exactly ``length``), with a non-zero lead: the training numbers of a
    run past the pool's 7 digits (the pool of [0, 2^20] has no longer ones) or of ``--train-numbers uniform``."""
    lengths = (
        torch.full((n,), length)
        if length
        else torch.randint(1, digits + 1, (n,), generator=generator)
    )
    draw = torch.randint(10, (n, digits), generator=generator)
    lead = torch.randint(1, 10, (n,), generator=generator)
    start = digits - lengths  # the column of each number's leading digit
    draw = torch.where(torch.arange(digits) < start[:, None], 0, draw)
    rows = torch.arange(n)
    draw[rows, start] = torch.where(
        lengths > 1, lead, draw[rows, start]
    )  # a one-digit number may be 0
    return draw


def training_operands(
    task: str,
    numbers: torch.Tensor | None,
    n: int,
    generator: torch.Generator,
    digits: int = POOL_DIGITS,
    length: int | None = None,
    unequal: bool = False,
    count: int | None = None,
):
    """Operands of the training distribution: drawn from the pool split ``numbers`` (the paper's
    protocol), or with ``numbers`` None random numbers of up to ``digits`` digits (``length``:
    exactly that many), each operand independently. ``unequal`` (with a ``length``): one operand,
    any, has ``length`` digits and the others a length uniform in 1 … ``length``, zero-padded as
    Position Coupling's and Abacus's training pads the shorter operands.
    ``count``: multiadd's operands (default ``operand_draw``)."""
    if numbers is not None:
        return sample_operands(task, numbers, n, generator, count)
    if task == "multiadd":
        count = count or operand_draw(generator)
        if not (unequal and length):
            return rearrange(
                random_numbers(n * count, digits, generator, length), "(n k) w -> n k w", k=count
            ), None
        operands = rearrange(
            pad_digits(random_numbers(n * count, length, generator), digits),
            "(n k) w -> n k w",
            k=count,
        )
        longest = torch.randint(count, (n,), generator=generator)
        operands[torch.arange(n), longest] = random_numbers(n, digits, generator, length)
        return operands, None
    a = random_numbers(n, digits, generator, length)
    if task in ("addition", "multiply") and unequal and length:
        b = pad_digits(random_numbers(n, length, generator), digits)
        swap = rearrange(torch.rand(n, generator=generator) < 0.5, "n -> n 1")
        return torch.where(swap, b, a), torch.where(swap, a, b)
    if task in ("addition", "multiply"):
        return a, random_numbers(n, digits, generator, length)
    return a, torch.randint(10, (n,), generator=generator) if task == "nx1" else None


def top_heavy(operands: tuple, share: float, generator: torch.Generator) -> tuple:
    """Rare cases made common: in a ``share`` of the examples every digit of every operand (from
    its number's leading digit on; a 0 stays 0) is redrawn uniformly in ``f … 9``, ``f`` uniform
    in 5 … 9 per example. Digits from the top of the range make the long and heavy carries that
    random numbers rarely hold (a product row carrying 8, a running sum of nines); ``f`` 9 is a
    number of nines. The other examples are the draw's own; with ``share`` 0 all are, and the
    generator is left as it was."""
    if not share:
        return operands
    n = operands[0].shape[0]
    chosen = torch.rand(n, generator=generator) < share
    floor = torch.randint(5, 10, (n,), generator=generator)

    def redrawn(x):
        digits = x if x.dim() > 1 else rearrange(x, "n -> n 1")
        at = lambda v: v.view(n, *([1] * (digits.dim() - 1)))  # noqa: E731
        inside = (digits != 0).cumsum(-1) > 0
        draw = at(floor) + (torch.rand(digits.shape, generator=generator) * (10 - at(floor))).long()
        new = torch.where(at(chosen) & inside, draw, digits)
        return new if x.dim() > 1 else new[:, 0]

    return tuple(None if x is None else redrawn(x) for x in operands)


def by_length(numbers: torch.Tensor) -> list[torch.Tensor]:
    """A split's numbers grouped by digit count: item ``ℓ − 1`` holds those of exactly ``ℓ``
    digits (0 counts as one digit), for ``ℓ`` in 1 … ``POOL_DIGITS``."""
    digits = 1 + (numbers[:, None] >= 10 ** torch.arange(1, POOL_DIGITS)).sum(dim=1)
    return [numbers[digits == length] for length in range(1, POOL_DIGITS + 1)]


# ---------------------------------------------------------------- extrapolation sets


def extrapolation_set_size(length: int) -> int:
    return min(10**length - 10 ** (length - 1), 10_000)


def exact_length_numbers(length: int, seed: int) -> torch.Tensor:
    """``min(10^L − 10^(L−1), 10000)`` distinct numbers of exactly ``L`` digits, ``[n, L]``.

    When there are at most 10,000 such numbers the set is all of them; otherwise a seeded
    sample without replacement (random digit strings with a non-zero lead, deduplicated).
    """
    if length < 1:
        raise UserError(f"length must be at least 1, got {length}")
    size = extrapolation_set_size(length)
    if size == 10**length - 10 ** (length - 1):
        return int_to_digits(torch.arange(10 ** (length - 1), 10**length), length)
    generator = torch.Generator().manual_seed(seed * 1_000_003 + length)
    found = torch.empty(0, length, dtype=torch.long)
    while len(found) < size:
        draw = torch.randint(10, (2 * size, length), generator=generator)
        draw[:, 0] = torch.randint(1, 10, (2 * size,), generator=generator)
        found = torch.unique(torch.cat([found, draw]), dim=0)
    keep = torch.randperm(len(found), generator=generator)[:size]
    return found[keep]


def operand_count(length: int) -> int:
    """Multiadd's operands at a test of ``length`` digits: the training ratio (``OPERANDS`` per
    ``POOL_DIGITS``) kept, so 2× the length is 2× the operands."""
    return max(2, -(-OPERANDS * length // POOL_DIGITS))


def extrapolation_operands(task: str, length: int, seed: int):
    """Operands of the seeded test set at ``length``: every method sees the same set. Multiadd:
    ``operand_count`` operands, one of exactly ``length`` digits (in a random place), the others
    of lengths uniform in 1 … ``length``."""
    a = exact_length_numbers(length, seed)
    generator = torch.Generator().manual_seed(seed * 1_000_003 + length + 7)
    if task == "multiadd":
        count = operand_count(length)
        others = rearrange(
            random_numbers(len(a) * (count - 1), length, generator), "(n k) w -> n k w", k=count - 1
        )
        place = rearrange(torch.randint(count, (len(a),), generator=generator), "n -> n 1")
        slot = rearrange(torch.arange(count), "k -> 1 k")
        order = torch.where(
            slot == place, count - 1, slot - (slot > place).long()
        )  # the exact-length one to `place`
        every = torch.cat([others, rearrange(a, "n w -> n 1 w")], dim=1)
        return every.gather(1, repeat(order, "n k -> n k w", w=length)), None
    if task == "addition":
        b = exact_length_numbers(length, seed + 1)
        b = b[torch.randperm(len(b), generator=generator)]
    elif (
        task == "multiply"
    ):  # half L × L digits; half one of L and one shorter (uniform in 1 … L − 1), either
        b = exact_length_numbers(length, seed + 1)
        b = b[torch.randperm(len(b), generator=generator)]
        if length > 1:
            half = len(b) // 2
            short = pad_digits(random_numbers(len(b) - half, length - 1, generator), length)
            swap = rearrange(torch.rand(len(short), generator=generator) < 0.5, "n -> n 1")
            a[half:], b[half:] = (
                torch.where(swap, short, a[half:]),
                torch.where(swap, b[half:], short),
            )
    elif task == "nx1":
        b = torch.randint(10, (len(a),), generator=generator)
    else:
        b = None
    return a, b
