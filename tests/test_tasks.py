import random

import pytest
import torch

from abcmini.config import Form
from abcmini.errors import UserError
from abcmini.names import TASKS, is_binary
from abcmini.tasks import (
    EOS,
    HINT,
    POOL_SIZE,
    SOS,
    VOCAB,
    Pool,
    detokenize,
    exact_length_numbers,
    extrapolation_operands,
    extrapolation_set_size,
    format_task,
    hinted_lengths,
    int_to_digits,
    padding_cells,
    parity_bits,
    random_numbers,
    sample_operands,
    top_heavy,
)


def digits(*numbers: int, width: int | None = None) -> torch.Tensor:
    width = width or max(len(str(n)) for n in numbers)
    return torch.tensor([[int(c) for c in str(n).zfill(width)] for n in numbers])


def target_text(example, row=0) -> str:
    """The decoder target without EOS, back in normal (most significant first) order."""
    out = detokenize(example.tgt_out[row])
    assert out.endswith("&") and detokenize(example.tgt_in[row]).startswith("$")
    return out[:-1][::-1]


def test_vocabulary_has_the_papers_15_tokens():
    assert VOCAB == "0123456789+*$&@" and len(VOCAB) == 15
    assert VOCAB[SOS] == "$" and VOCAB[EOS] == "&"


def test_papers_example_is_reversed_and_zero_padded():
    ex = format_task("addition", digits(123), digits(748), pad_width=4)
    assert detokenize(ex.src[0]) == "$0123+0748"
    assert detokenize(ex.tgt_out[0]) == "17800&"  # 871 → 00871 → reversed 17800
    assert detokenize(ex.tgt_in[0]) == "$17800"


EDGE = [0, 9, 99, 999_999, 9_999_999, 2**20, 1_000_000, 10]


@pytest.mark.parametrize("pad_width", [7, 12, 60])
def test_successor_targets(pad_width):
    numbers = EDGE + [random.Random(pad_width).randrange(2**20) for _ in range(50)]
    ex = format_task("successor", digits(*numbers, width=7), None, pad_width)
    assert ex.src.shape == (len(numbers), pad_width + 1)
    for row, n in enumerate(numbers):
        assert detokenize(ex.src[row]) == "$" + str(n).zfill(pad_width)
        assert target_text(ex, row) == str(n + 1).zfill(pad_width + 1)


def test_successor_of_the_largest_number_of_the_pad_width():
    ex = format_task("successor", digits(10**30 - 1), None, 30)
    assert target_text(ex) == "1" + "0" * 30


def test_addition_targets_random_and_edge():
    rng = random.Random(1)
    pairs = [(0, 0), (9, 1), (999_999, 1), (2**20, 2**20), (99, 999_999)]
    pairs += [(rng.randrange(10**40), rng.randrange(10**40)) for _ in range(50)]
    a, b = zip(*pairs)
    ex = format_task("addition", digits(*a, width=40), digits(*b, width=40), 40)
    for row, (x, y) in enumerate(pairs):
        assert detokenize(ex.src[row]) == f"${str(x).zfill(40)}+{str(y).zfill(40)}"
        assert target_text(ex, row) == str(x + y).zfill(41)


@pytest.mark.parametrize("b", [0, 9, 1, 7])
def test_nx1_targets(b):
    numbers = EDGE + [random.Random(b).randrange(10**25) for _ in range(30)]
    ex = format_task("nx1", digits(*numbers, width=25), torch.full((len(numbers),), b), 25)
    for row, n in enumerate(numbers):
        assert detokenize(ex.src[row]) == f"${str(n).zfill(25)}*{b}"
        assert target_text(ex, row) == str(n * b).zfill(26)


def test_padding_cells_are_the_zeros_in_front_of_each_number():
    """Against the numbers' lengths: in ``$ a + b`` padded to 9 digits, ``a`` has 9 − len(a)
    padding zeros after the ``$``; the result, least significant digit first after SOS, has them
    at its end. The number 0 is one real digit."""
    rng = random.Random(3)
    pairs = [(0, 0), (5, 30), (100, 7), (10**8, 1)] + [
        (rng.randrange(10 ** rng.randint(1, 8)), rng.randrange(10**8)) for _ in range(40)
    ]
    a, b = zip(*pairs)
    ex = format_task("addition", digits(*a, width=9), digits(*b, width=9), 9)
    src, out = padding_cells(ex.src), padding_cells(ex.tgt_in.flip(1)).flip(1)
    for row, (x, y) in enumerate(pairs):
        lead = lambda n, width: [True] * (width - len(str(n))) + [False] * len(str(n))  # noqa: E731
        assert src[row].tolist() == [False] + lead(x, 9) + [False] + lead(y, 9)
        assert out[row].tolist() == [False] + lead(x + y, 10)[::-1]


@pytest.mark.parametrize("aligned", [False, True])
def test_every_input_starts_with_a_marker(aligned):
    """Without positions, the first token is what tells the final-carry row from the end row."""
    a, b = digits(5, 123), digits(0, 748)
    for task in TASKS:
        second = (
            torch.tensor([0, 3])
            if task == "nx1"
            else b
            if task in ("addition", "multiply")
            else None
        )
        first = torch.stack([a, b], dim=1) if task == "multiadd" else a
        src = format_task(task, first, second, 4, Form(aligned and is_binary(task))).src
        marker = {"addition": "+", "nx1": "*"}[task] if aligned and is_binary(task) else "$"
        assert detokenize(src[:, 0]) == marker * 2, task


@pytest.mark.parametrize(
    "task, a, b, msd, reversed",
    [
        ("successor", 123, None, "$0123", "$3210"),
        ("addition", 123, 748, "$0123+0748", "$3210+8470"),
        ("nx1", 123, 7, "$0123*7", "$3210*7"),
        ("multiply", 12, 34, "$0012*0034&", "$2100*4300&"),
        ("multiadd", (12, 340, 5), None, "$0012+0340+0005&", "$2100+0430+5000&"),
    ],
)
def test_reversed_operands_are_written_least_significant_digit_first_and_keep_the_answer(
    task, a, b, msd, reversed
):
    first = torch.stack([digits(x, width=3) for x in a], 1) if task == "multiadd" else digits(a)
    second = None if b is None else torch.tensor([b]) if task == "nx1" else digits(b)
    plain = format_task(task, first, second, 4)
    flipped = format_task(task, first, second, 4, Form(reversed=True))
    assert (detokenize(plain.src[0]), detokenize(flipped.src[0])) == (msd, reversed)
    assert torch.equal(plain.tgt_out, flipped.tgt_out) and torch.equal(plain.tgt_in, flipped.tgt_in)


def test_reversed_operands_interleave_from_the_least_significant_pair_and_parity_flips_its_bits():
    aligned = format_task("addition", digits(123), digits(748), 4, Form(aligned=True))
    both = format_task("addition", digits(123), digits(748), 4, Form(aligned=True, reversed=True))
    assert (detokenize(aligned.src[0]), detokenize(both.src[0])) == ("+00172438", "+38241700")
    plain = format_task("parity", digits(6), None, 1)  # 4 bits: 0110
    flipped = format_task("parity", digits(6), None, 1, Form(reversed=True))
    assert detokenize(plain.src[0])[1:] == "0110" == detokenize(flipped.src[0])[1:][::-1]
    assert torch.equal(plain.tgt_out, flipped.tgt_out)


@pytest.mark.parametrize("task", ["successor", "addition", "nx1"])
@pytest.mark.parametrize("reversed_", [False, True])
def test_index_hints_name_each_digits_significance_and_drop_out_to_the_plain_example(
    task, reversed_
):
    rng = random.Random(5)
    numbers = [rng.randrange(10**6) for _ in range(64)]
    a = digits(*numbers, width=6)
    b = (
        torch.tensor([rng.randrange(10) for _ in numbers])
        if task == "nx1"
        else digits(*[rng.randrange(10**6) for _ in numbers], width=6)
        if task == "addition"
        else None
    )
    form, hints = Form(reversed=reversed_), Form(reversed=reversed_, hints=30)
    plain = format_task(task, a, b, 6, form)
    tested = format_task(task, a, b, 6, hints)
    drawn = format_task(task, a, b, 6, hints, torch.Generator().manual_seed(1))
    assert (tested.src.shape[1], tested.tgt_in.shape[1]) == hinted_lengths(task, 6)
    for example, test in ((tested, True), (drawn, False)):
        for hinted, bare, lsd_first in (
            (example.src, plain.src, reversed_),
            (example.tgt_out[:, :-1], plain.tgt_out[:, :-1], True),
        ):
            is_hint = hinted >= HINT
            assert torch.equal(rearrange_out(hinted, ~is_hint), bare)  # the hints come out whole
            for row in range(len(numbers)):
                text = hinted[row].tolist()
                shape = "".join("d" if t < 10 else "h" if t >= HINT else "." for t in text)
                assert all(run == "hd" * (len(run) // 2) for run in shape.split("."))  # hint, digit
                places = place_of_each_digit(bare[row].tolist(), lsd_first)
                named = [t - HINT for t in text if t >= HINT]
                offsets = {name - place for name, place in zip(named, places)}
                assert len(offsets) == 1 and len(named) == len(places)  # one offset per example
                assert offsets == {0} if test else 0 <= offsets.pop() <= 30 - 7
    offsets = (drawn.tgt_out[:, 0] - HINT).tolist()  # the answer's first hint names place 0
    assert len(set(offsets)) > 10  # offsets are drawn per example
    text = detokenize(tested.src[0])
    assert len(text) == tested.src.shape[1] and text[1] in "abcdefghijklmnopqrstuvwxyz"
    with pytest.raises(UserError, match="7-digit answers need 7 index hints; the run has 6"):
        format_task(task, a, b, 6, Form(hints=6))


def rearrange_out(tokens: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
    return torch.stack([row[k] for row, k in zip(tokens, keep)])


def place_of_each_digit(tokens: list[int], lsd_first: bool) -> list[int]:
    """Each digit's significance in its number (a run of digit tokens), by Python."""
    places, run = [], []
    for token in tokens + [-1]:
        if 0 <= token < 10:
            run.append(token)
            continue
        places += list(range(len(run))) if lsd_first else list(range(len(run)))[::-1]
        run = []
    return places


def test_a_top_heavy_share_redraws_whole_examples_from_a_floor_and_keeps_their_lengths():
    g = torch.Generator().manual_seed(3)
    n = 2000
    a, b, c = random_numbers(n, 6, g), random_numbers(n, 6, g), torch.randint(10, (n,), generator=g)
    heavy = top_heavy((a, b, c), 0.25, g)
    changed = torch.stack([(x != y).reshape(n, -1).any(1) for x, y in zip(heavy, (a, b, c))]).any(0)
    assert 0.2 < changed.float().mean() < 0.3  # about the share, whole examples
    lead = lambda x: (x != 0).int().argmax(1)  # noqa: E731 — each number's first digit
    for before, after in zip((a, b), heavy):
        assert torch.equal(lead(before), lead(after))  # every number keeps its length
        for row in changed.nonzero().flatten().tolist():
            digits = after[row, lead(before)[row] :]
            assert (digits >= 5).all() or before[row].eq(0).all()
    floors = [
        min(int(x[row][x[row] > 0].min()) for x in heavy[:2] if x[row].any())
        for row in changed.nonzero().flatten().tolist()
    ]
    assert {9, 8, 5} <= set(floors) and min(floors) >= 5  # floors 5 … 9; all nines among them
    kept = ~changed
    assert all(torch.equal(x[kept], y[kept]) for x, y in zip(heavy, (a, b, c)))
    assert top_heavy((a, None), 0.0, g)[0].equal(a) and top_heavy((a, None), 0.0, g)[1] is None
    state = g.get_state()  # share 0 draws nothing: the protocol's training stream is unchanged
    top_heavy((a, b, c), 0.0, g)
    assert torch.equal(g.get_state(), state)


def test_parity_running_xor_and_classification():
    rng = random.Random(2)
    numbers = [0, 1, 2, 3, 9, 2**20, 10**20 - 1] + [rng.randrange(10**20) for _ in range(40)]
    width = parity_bits(20)
    assert width == (10**20 - 1).bit_length() == 67
    seq = format_task("parity", digits(*numbers, width=20), None, 20)
    cls = format_task("parity_class", digits(*numbers, width=20), None, 20)
    for row, n in enumerate(numbers):
        bits = bin(n)[2:].zfill(width)
        assert detokenize(seq.src[row]) == "$" + bits
        running, acc = [], 0
        for bit in reversed(bits):  # y_1 = x_1 (least significant), y_i = y_{i-1} xor x_i
            acc ^= int(bit)
            running.append(str(acc))
        assert detokenize(seq.tgt_out[row]) == "".join(running) + "&"
        assert detokenize(cls.tgt_out[row]) == str(bin(n).count("1") % 2) + "&"


def test_too_wide_number_is_refused():
    with pytest.raises(ValueError):
        format_task("successor", digits(12345678), None, 7)


def test_pool_is_a_seeded_7_to_1_permutation():
    pool = Pool.make(0)
    together = torch.cat([pool.train, pool.valid])
    assert torch.equal(together.sort().values, torch.arange(POOL_SIZE))
    assert len(pool.train) == POOL_SIZE * 7 // 8
    assert torch.equal(Pool.make(0).train, pool.train) and not torch.equal(
        Pool.make(1).train, pool.train
    )


def test_training_operands_come_from_their_split():
    pool = Pool.make(3)
    train = set(pool.train.tolist())
    a, b = sample_operands("addition", pool.train, 500, torch.Generator().manual_seed(0))
    for x in (a, b):
        values = (x * 10 ** torch.arange(x.shape[1] - 1, -1, -1)).sum(1)
        assert set(values.tolist()) <= train
    _, b = sample_operands("nx1", pool.train, 500, torch.Generator().manual_seed(0))
    assert b.min() >= 0 and b.max() <= 9 and len(b.unique()) == 10


@pytest.mark.parametrize("length", [1, 2, 4, 5, 6, 10, 20, 60])
def test_extrapolation_sets_have_exactly_l_digits_and_the_stated_size(length):
    numbers = exact_length_numbers(length, seed=0)
    expected = min(10**length - 10 ** (length - 1), 10_000)
    assert extrapolation_set_size(length) == expected
    assert numbers.shape == (expected, length)
    assert (numbers[:, 0] > 0).all()
    assert len(torch.unique(numbers, dim=0)) == expected  # distinct numbers
    assert torch.equal(numbers, exact_length_numbers(length, seed=0))  # seeded


def test_small_lengths_are_the_whole_range():
    assert sorted((exact_length_numbers(3, 0) @ torch.tensor([100, 10, 1])).tolist()) == list(
        range(100, 1000)
    )


def test_extrapolation_operands_for_binary_tasks():
    a, b = extrapolation_operands("addition", 12, seed=5)
    assert a.shape == b.shape == (10_000, 12) and (b[:, 0] > 0).all() and not torch.equal(a, b)
    a, b = extrapolation_operands("nx1", 12, seed=5)
    assert b.shape == (10_000,) and set(b.unique().tolist()) == set(range(10))
    ex = format_task("addition", *extrapolation_operands("addition", 60, seed=0), 60)
    assert ex.src.shape == (10_000, 122) and ex.tgt_out.shape == (10_000, 62)


def test_int_to_digits():
    assert int_to_digits(torch.tensor([0, 7, 1048576]), 7).tolist() == [
        [0] * 7,
        [0] * 6 + [7],
        [1, 0, 4, 8, 5, 7, 6],
    ]


def test_train_digits_beyond_the_pool_draws_every_length_up_to_it_and_the_pool_stays_the_papers(
    tmp_path,
):
    """``--train-digits 12``: numbers of uniformly random length 1 … 12, a non-zero lead, in
    training, validation, the frame and the following test frames; 7 keeps the paper's pool,
    draw for draw."""
    from abcmini.config import ConfigError, RunConfig
    from abcmini.evaluate import pad_width_for
    from abcmini.tasks import random_numbers, sample_operands, training_operands
    from abcmini.train import Trainer

    numbers = random_numbers(12_000, 12, torch.Generator().manual_seed(0))
    lengths = 12 - (numbers.cumsum(1) == 0).sum(
        1
    )  # a number's length: its digits from the first non-zero one
    counts = torch.bincount(lengths.clamp(min=1), minlength=13)[1:]
    assert counts.min() > 800 and counts.max() < 1200  # about 1,000 of each length 1 … 12
    exact = random_numbers(100, 12, torch.Generator().manual_seed(1), length=9)
    assert (exact[:, :3] == 0).all() and (exact[:, 3] > 0).all()
    pool = Pool.make(0).train
    draws = [
        f(*args, 64, torch.Generator().manual_seed(2))
        for f, args in (
            (sample_operands, ("addition", pool)),
            (training_operands, ("addition", pool)),
        )
    ]
    assert all(torch.equal(x, y) for x, y in zip(*draws))  # 7 digits: the pool, draw for draw
    cfg = RunConfig(task="addition", preset="tiny", pad_width=14, train_digits=12, valid_size=60)
    trainer = Trainer(cfg, str(tmp_path))
    one = format_task(
        "addition", *training_operands("addition", None, 1, torch.Generator(), 12), 14
    )
    assert trainer.valid.src.shape == (60, one.src.shape[1])  # validation in the pad-14 frame
    longest = max(
        14 - int((digits.cumsum(0) == 0).sum()) for digits in trainer.batch().src[:, 1:15]
    )
    assert longest > 7  # numbers the pool does not have
    assert (
        pad_width_for(20, 14, follows=True, train_digits=12) == 22
    )  # the training numbers' two leading zeros, kept
    with pytest.raises(ConfigError, match="pad width must be at least 12"):
        RunConfig(task="addition", pad_width=10, train_digits=12)


def test_uniform_training_numbers_vary_every_digit_at_seven_where_the_pools_do_not(tmp_path):
    """``--train-numbers uniform``: at the pool's 7 digits the numbers are drawn digit by digit,
    so a 7-digit operand's top digits vary (the pool's are 1,000,000–1,048,576), in training,
    in validation and in the +varied batches of one length; ``pool`` keeps the paper's data."""
    from abcmini.config import ConfigError, RunConfig
    from abcmini.outputs.report import describe_protocol, protocol
    from abcmini.train import Trainer

    def sevens(cfg, batches=30):  # every 7-digit operand a run trains and validates on
        trainer = Trainer(cfg, str(tmp_path))
        inputs = [detokenize(row) for _ in range(batches) for row in trainer.batch().src] + [
            detokenize(row) for row in trainer.valid.src
        ]
        return [
            int(n) for text in inputs for n in text[1:].split("+") if len(n) == 7 and n[0] != "0"
        ]

    for frame in (
        {"pad_width": 7},
        {"varied": True},
    ):  # the fixed frame, and +varied's batches of one length
        pool = sevens(
            RunConfig(task="addition", preset="tiny", valid_size=64, batch_size=64, **frame)
        )
        drawn = sevens(
            RunConfig(
                task="addition",
                preset="tiny",
                valid_size=64,
                batch_size=64,
                train_numbers="uniform",
                **frame,
            )
        )
        assert pool and max(pool) <= 2**20  # the paper's pool
        assert (
            len(drawn) > 100 and len({n // 10**5 for n in drawn}) > 50
        )  # the top two digits: 10 … 99
    with pytest.raises(ConfigError, match="--train-numbers is pool or uniform"):
        RunConfig(task="addition", train_numbers="digits")
    record = {"recipe": "decoder", "arch": "decoder", "preset": "cpu", "train_digits": 7}
    drawn = protocol({**record, "train_numbers": "uniform"})
    assert (
        drawn != protocol(record) == protocol({**record, "train_numbers": "pool"})
    )  # the report pools them apart
    assert "training numbers drawn digit by digit" in describe_protocol(
        drawn
    ) and "digit" not in describe_protocol(protocol(record))


def test_unequal_operands_are_one_of_the_batch_length_and_one_up_to_it_either_side():
    """``--operand-lengths unequal``: Position Coupling's and Abacus's training pairs, the shorter
    operand zero-padded to the longer's length."""
    from abcmini.tasks import training_operands

    a, b = training_operands(
        "addition", None, 4000, torch.Generator().manual_seed(0), 12, length=9, unequal=True
    )
    lengths = [(12 - (x.cumsum(1) == 0).sum(1)).clamp(min=1) for x in (a, b)]  # 0 has one digit
    longer, shorter = torch.maximum(*lengths), torch.minimum(*lengths)
    assert (
        (longer == 9).all() and shorter.min() == 1 and 0.4 < (lengths[0] == 9).float().mean() < 0.75
    )
    counts = torch.bincount(shorter, minlength=10)[
        1:
    ]  # the other operand: each length 1 … 9 about equally often
    assert counts.min() > 0.6 * counts.max()
    ex = format_task("addition", a, b, 9)
    equal = format_task(
        "addition", *training_operands("addition", None, 4000, torch.Generator(), 12, length=9), 9
    )
    assert ex.src.shape == equal.src.shape  # the same frame: the shorter operand padded with zeros


def test_a_varied_run_with_unequal_operands_trains_and_validates_on_them(tmp_path):
    from abcmini.config import RunConfig
    from abcmini.train import Trainer

    cfg = RunConfig(
        task="addition",
        preset="tiny",
        varied=True,
        train_digits=9,
        pad_width=9,
        valid_size=90,
        operand_lengths="unequal",
    )
    trainer = Trainer(cfg, str(tmp_path))
    for example in (trainer.batch(), trainer.valid):
        width = (example.src.shape[1] - 2) // 2  # $a+b in a frame of the batch's length
        leads = example.src[:, [1, 2 + width]]  # each operand's first digit
        assert (leads == 0).any(dim=1).float().mean() > 0.5 and not (leads == 0).all(dim=1).any()
