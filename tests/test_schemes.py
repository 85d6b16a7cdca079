"""The positional schemes of 2023–2024, each by the property that defines it: Abacus restarts its
count in every number, Position Coupling gives digits of equal significance one id, randomized
positions are sorted draws from a range beyond the training length, FIRE maps every distance of
every length into [0, 1]; and each trains and decodes in both models."""

import pytest
import torch

from abcmini.experiment import RunConfig
from abcmini.names import ConfigError
from abcmini.nn.abacus import abacus_ids
from abcmini.nn.coupling import coupled_ids, multiply_ids, number_ids
from abcmini.nn.fire import FIRE
from abcmini.nn.positions import significance
from abcmini.nn.randomized import eval_generator, randomized_positions
from abcmini.nn.token_positions import TokenPositions
from abcmini.tasks import HINT, PAD, Form, exact_length_numbers, format_task, mixed
from abcmini.train import Trainer

NEW = ("random", "fire", "abacus", "coupling")


def addition(digits=3, pad=5, n=4):
    return format_task(
        "addition", exact_length_numbers(digits, 0)[:n], exact_length_numbers(digits, 1)[:n], pad
    )


def test_significance_counts_each_number_from_its_least_significant_digit():
    ex = addition()  # $ a(5) + b(5) → answer reversed, 6 digits
    assert significance(ex.src < 10, lsd_first=False)[0].tolist() == [
        -1,
        4,
        3,
        2,
        1,
        0,
        -1,
        4,
        3,
        2,
        1,
        0,
    ]
    assert significance(ex.tgt_in < 10, lsd_first=True)[0].tolist() == [-1, 0, 1, 2, 3, 4, 5]


def test_abacus_restarts_its_count_in_every_number_and_shifts_it_by_one_offset():
    ex = addition()
    ids = abacus_ids(ex.src < 10, False, torch.tensor([0, 7, 0, 0]))
    assert ids[0].tolist() == [
        0,
        5,
        4,
        3,
        2,
        1,
        0,
        5,
        4,
        3,
        2,
        1,
    ]  # "$", a from 5 down to 1, "+", b again from 5
    assert ids[1].tolist() == [
        0,
        12,
        11,
        10,
        9,
        8,
        0,
        12,
        11,
        10,
        9,
        8,
    ]  # k = 7 on every digit, 0 elsewhere
    answer = abacus_ids(ex.tgt_in < 10, True, torch.zeros(4, dtype=torch.long))
    assert answer[0].tolist() == [0, 1, 2, 3, 4, 5, 6]


def test_coupling_gives_digits_of_equal_significance_one_id_in_operands_and_answer():
    ex = format_task("addition", exact_length_numbers(4, 0)[:4], exact_length_numbers(2, 1)[:4], 6)
    start = torch.tensor([1, 30, 5, 9])
    src, answer = coupled_ids(ex.src < 10, False, start), coupled_ids(ex.tgt_in < 10, True, start)
    a, b = src[:, 1:7], src[:, 8:14]  # "$" a(6) "+" b(6)
    assert torch.equal(a, b) and torch.equal(
        a.flip(1), answer[:, 1:7]
    )  # significance 0 … 5: one id in all three
    assert (
        (src[:, 0] == start - 1).all()
        and (src[:, 7] == start - 1).all()
        and (answer[:, 0] == start - 1).all()
    )
    assert answer[1].tolist() == [29, 30, 31, 32, 33, 34, 35, 36]


@pytest.mark.parametrize(
    "scheme, task, levels",
    [("abacus", "addition", 1), ("coupling", "addition", 1), ("coupling", "multiply", 3)],
)
def test_reversed_operands_give_each_digit_the_ids_of_its_significance(scheme, task, levels):
    """``lsd_input``: a prompt written least significant digit first gives every digit the
    embedding its digit of equal significance gets in the most-significant-first prompt."""
    a, b = exact_length_numbers(3, 0)[:4], exact_length_numbers(3, 1)[:4]
    msd, lsd = (
        TokenPositions(scheme, 16, 10, levels=levels, lsd_input=flip).eval() for flip in (0, 1)
    )
    lsd.load_state_dict(msd.state_dict())  # one table: only the ids differ
    plain, flipped = (
        module(tokens, ex.src.shape[1], module.draw(4, 10, "cpu", count=2))
        for module, ex in zip(
            (msd, lsd), (format_task(task, a, b, 5, Form(reversed=f)) for f in (0, 1))
        )
        for tokens in [torch.cat([ex.src, ex.tgt_in], dim=1)]
    )
    mirror = {"addition": [0, *range(5, 0, -1), 6, *range(11, 6, -1)]}.get(
        task, [0, *range(5, 0, -1), 6, *range(11, 6, -1), 12]
    )  # each operand's digits in the other order; "$", the operator and the end stay
    order = mirror + list(range(len(mirror), plain.shape[1]))
    assert torch.equal(flipped[:, order], plain)
    assert not torch.equal(flipped, plain)


@pytest.mark.parametrize("scheme", ["abacus", "coupling"])
@pytest.mark.parametrize("reversed_", [False, True])
def test_index_hints_leave_each_digit_the_embedding_of_its_significance(scheme, reversed_):
    """Hints (a token before every digit) do not end a number: every digit gets the embedding it
    gets without hints, every hint the one a non-digit token gets (Abacus 0, Coupling ``s − 1``)."""
    a, b = exact_length_numbers(4, 0)[:4], exact_length_numbers(3, 1)[:4]
    module = TokenPositions(scheme, 16, 10, hint_from=HINT).eval()
    plain, hinted = (
        module(tokens, ex.src.shape[1], module.draw(4, 10, "cpu"))
        for ex in (
            format_task("addition", a, b, 5, Form(reversed=reversed_, hints=hints))
            for hints in (0, 8)
        )
        for tokens in [torch.cat([ex.src, ex.tgt_in], dim=1)]
    )
    ex = format_task("addition", a, b, 5, Form(reversed=reversed_, hints=8))
    is_hint = torch.cat([ex.src, ex.tgt_in], dim=1)[0] >= HINT
    assert torch.equal(hinted[:, ~is_hint], plain)
    other = plain[0, 0]  # "$": no digit's id
    assert all(torch.equal(row, other) for row in hinted[0, is_hint])
    unhinted = TokenPositions(scheme, 16, 10).eval()  # hints read as tokens that end numbers
    unhinted.load_state_dict(module.state_dict())
    tokens = torch.cat([ex.src, ex.tgt_in], dim=1)
    assert not torch.equal(unhinted(tokens, ex.src.shape[1], module.draw(4, 10, "cpu")), hinted)


def test_coupling_second_level_gives_a_running_sum_the_id_of_the_operand_it_adds():
    """multiadd's ``$a1+a2+a3&`` → ``s1+s2+s3+``: the m-th number of each part (and the separator
    after it) gets ``t + m``, so ``s_m = s_{m−1} + a_m`` reads one id from ``a_m`` and one below."""
    ex = format_task(
        "multiadd", torch.randint(0, 10, (2, 3, 3)), None, 3
    )  # two sums of three 3-digit operands
    start = torch.tensor([1, 40])
    src, answer = number_ids(ex.src < 10, start), number_ids(ex.tgt_in < 10, start)
    assert src[0].tolist() == [
        1,
        2,
        2,
        2,
        2,
        3,
        3,
        3,
        3,
        4,
        4,
        4,
        4,
    ]  # "$" a1(3) "+" a2(3) "+" a3(3) "&"
    assert answer[0].tolist() == [1] + [2] * 6 + [3] * 6 + [4] * 5  # "$" s1(5) "+" s2(5) "+" s3(5)
    assert (src[1] - src[0] == 39).all() and (answer[1] - answer[0] == 39).all()


def test_coupling_on_multiply_points_each_row_at_the_digits_of_a_b_and_the_sum_it_adds_to():
    """``$12*34&`` → ``840+8040+`` (s_0 = 12·4 = 48, s_1 = 48 + 12·30 = 408, reversed): row k of
    block j reads a's digit k − j, b's digit j and row k of block j − 1, one shared id each."""
    ex = format_task("multiply", torch.tensor([[1, 2]]), torch.tensor([[3, 4]]), 2)
    levels, n = (
        multiply_ids(ex.src < 10, ex.tgt_in < 10, torch.tensor([[10, 20, 30]])),
        ex.src.shape[1],
    )
    prompt, answer = (
        [level[0, :n].tolist() for level in levels],
        [level[0, n:].tolist() for level in levels],
    )
    #               $   1   2   *   3   4   &
    assert prompt == [[9, 11, 10, 9, 9, 9, 9], [19, 19, 19, 19, 21, 20, 19], [29] * 7]
    #                 $  8   4   0   +  8   0   4   0   +
    assert answer == [
        [
            9,
            10,
            11,
            12,
            9,
            9,
            10,
            11,
            12,
            9,
        ],  # a's digit k − j (10: the 2, 11: the 1); row 0 of s_1 copies
        [19, 20, 20, 20, 20, 21, 21, 21, 21, 21],  # b's digit j (20: the 4, 21: the 3)
        [29, 30, 31, 32, 29, 30, 31, 32, 33, 29],
    ]  # row k of every block


def test_coupling_second_level_is_a_table_of_its_own_that_moves_the_embedding():
    from abcmini.nn.decoder import build_model

    one, two = (
        RunConfig(
            task="multiadd",
            arch="decoder",
            scheme="coupling",
            preset="tiny",
            pad_width=3,
            train_digits=3,
            coupling_levels=levels,
        )
        for levels in (1, 2)
    )
    model = build_model(two.model_config()).eval()
    assert (
        model.token_positions.numbers is not None
        and build_model(one.model_config()).token_positions.numbers is None
    )
    ex = format_task("multiadd", torch.randint(0, 10, (2, 4, 3)), None, 3)
    shift = model.shift(ex.src, ex.tgt_in.shape[1])
    assert shift.tolist() == [[1, 1], [1, 1]]  # fixed at test
    base = model.place(
        torch.zeros(2, ex.src.shape[1], model.cfg.d_model), ex.src, ex.src.shape[1], shift
    )
    torch.nn.init.zeros_(model.token_positions.numbers.weight)
    assert not torch.equal(
        base, model.place(torch.zeros_like(base), ex.src, ex.src.shape[1], shift)
    )
    for task, scheme, levels in (
        ("multiadd", "fire", 2),
        ("addition", "coupling", 2),
        ("multiadd", "coupling", 3),
    ):
        with pytest.raises(ConfigError, match="coupling-levels"):
            RunConfig(task=task, scheme=scheme, coupling_levels=levels)


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
@pytest.mark.parametrize("scheme", ["abacus", "coupling"])
def test_training_draws_train_every_id_of_the_table_and_none_past_it(arch, scheme):
    """Position Coupling at its paper's scale: 202 ids, 30-digit training numbers, 200-digit tests
    need ids up to 201. The draw is bounded by the numbers' length, not the sequence's: bounded
    by the 63-token prompt, no id above 169 was ever trained."""
    from abcmini.nn.decoder import build_model

    cfg = RunConfig(
        task="addition", arch=arch, scheme=scheme, preset="tiny", pad_width=30, max_position=202
    )
    model = build_model(cfg.model_config()).train()
    ex = addition(digits=30, pad=30, n=1)
    shifts = model.shift(ex.src.expand(3000, -1), ex.tgt_in.shape[1])  # a training batch's draws
    ids_of = coupled_ids if scheme == "coupling" else abacus_ids
    answers = ids_of(
        (ex.tgt_in < 10).expand(3000, -1), True, shifts
    )  # the answer's 31 digits hold the top ids
    assert int(answers.max()) in (
        201,
        202,
    )  # a 200-digit test's top id (201) was trained, and none past the table


@pytest.mark.parametrize("scheme", ["abacus", "coupling"])
def test_a_decoded_answer_past_the_table_is_held_at_its_top_and_a_prompt_past_it_is_refused(scheme):
    """A greedy answer that never writes its separator runs its digits' ids past the table: it is
    wrong, and scored so, not an error; a prompt past the table is a test longer than the table."""
    from abcmini.errors import InputError
    from abcmini.nn.token_positions import TokenPositions

    positions = TokenPositions(scheme, 8, digit_tokens=10, max_position=20).eval()
    prompt, answer = (
        torch.tensor([[11, 1, 2, 3, 12, 4, 5, 6, 13]]),
        torch.full((1, 30), 7),
    )  # a 30-digit run
    shift = positions.draw(1, 3, "cpu")
    with pytest.raises(InputError, match="exceeds"):
        positions(torch.cat([prompt, answer], dim=1), 9, shift)
    held = positions(torch.cat([prompt, answer], dim=1), 9, shift, decoding=True)
    assert torch.equal(held[0, -1], held[0, -2])  # both at the table's last row
    long_prompt = torch.cat([torch.full((1, 25), 1), prompt], dim=1)
    with pytest.raises(InputError, match="exceeds"):
        positions(long_prompt, long_prompt.shape[1], shift, decoding=True)


def test_randomized_positions_are_sorted_distinct_draws_beyond_the_sequence():
    first, second = randomized_positions(64, 30, 2048), randomized_positions(64, 30, 2048)
    assert (first.diff(dim=-1) > 0).all() and first.min() >= 0 and first.max() < 2048
    assert first.max() > 500 and not torch.equal(
        first, second
    )  # the range, not the length, bounds them
    assert torch.equal(
        randomized_positions(8, 30, 2048, eval_generator(30)),
        randomized_positions(8, 30, 2048, eval_generator(30)),
    )
    with pytest.raises(ValueError, match="do not fit"):
        randomized_positions(1, 3000, 2048)


@pytest.mark.parametrize("causal", [True, False])
def test_fire_feeds_its_mlp_distances_normalized_into_0_1_at_every_length(causal):
    fire = FIRE(heads=4, causal=causal)
    seen = []
    fire.mlp[0].register_forward_hook(lambda module, args, out: seen.append(args[0]))
    for n in (10, 100, 2000):
        positions = torch.arange(n)
        bias = fire(positions, positions)
        assert bias.shape == (4, n, n)
        assert 0 <= seen[-1].min() and seen[-1].max() < 1
        diagonal = bias.diagonal(dim1=1, dim2=2)
        assert torch.allclose(
            diagonal, diagonal[:, :1].expand_as(diagonal)
        )  # distance 0: one bias at every position


def test_fire_builds_a_test_bias_once_and_forgets_it_when_the_parameters_may_move():
    fire, positions = FIRE(heads=4), torch.arange(50)
    builds = []
    fire.mlp[0].register_forward_hook(lambda module, args, out: builds.append(1))
    fire.eval()
    with torch.no_grad():
        first = fire(positions, positions)
        assert (
            torch.equal(fire(positions, positions), first) and len(builds) == 1
        )  # one build for every batch of a test
        assert (
            fire(positions[:20], positions[:20]).shape == (4, 20, 20) and len(builds) == 2
        )  # other positions: their own
    fire.train()
    optimizer = torch.optim.SGD(fire.parameters(), lr=1.0)
    fire(positions, positions).sum().backward()
    optimizer.step()
    fire.eval()
    with torch.no_grad():
        moved = fire(positions, positions)
        assert torch.allclose(moved, fire.bias(positions, positions)) and not torch.allclose(
            moved, first
        )


@pytest.mark.parametrize("causal", [True, False])
def test_fire_over_a_batch_of_positions_is_each_rows_own_bias(causal):
    fire = FIRE(heads=3, causal=causal)
    positions = randomized_positions(4, 12, 200, torch.Generator().manual_seed(0))
    batched = fire(positions, positions)
    assert batched.shape == (4, 3, 12, 12)
    for row, own in zip(batched, positions):
        assert torch.allclose(row, fire(own, own))


def tiny_addition(tmp_path, **settings) -> Trainer:
    """A tiny decoder-only Addition run of two steps."""
    cfg = RunConfig(
        task="addition",
        arch="decoder",
        preset="tiny",
        train_numbers="uniform",
        steps=2,
        valid_size=10,
        **settings,
    )
    return Trainer(cfg, str(tmp_path))


def test_zhou_recipe_trains_hints_over_randomized_fire_and_decodes_alike_with_and_without_cache(
    tmp_path,
):
    """Index hints, reversed operands and FIRE over randomized positions (Zhou et al.)."""
    trainer = tiny_addition(
        tmp_path,
        scheme="fire",
        fire_positions="randomized",
        max_position=300,
        index_hints=30,
        operand_order="reversed",
        pad_width=5,
        train_digits=5,
        batch_size=8,
    )
    cfg = trainer.cfg
    assert trainer.model.to_logits.out_features == 15 + 30 and not trainer.model.batch_invariant
    assert all(trainer.step() > 0 for _ in range(2))
    drawn = [trainer.model.positions(6, 4, batch=2) for _ in range(2)]
    assert not torch.equal(*drawn) and drawn[0].shape == (2, 10)  # a fresh draw in training
    trainer.model.eval()
    ex = format_task(
        "addition", torch.randint(0, 10, (6, 20)), torch.randint(0, 10, (6, 20)), 20, cfg.form
    )
    steps = ex.tgt_out.shape[1]
    assert torch.equal(
        trainer.model.greedy(ex.src, steps), trainer.model.greedy(ex.src, steps, use_cache=False)
    )
    logits, _ = trainer.model(ex.src, ex.tgt_in)
    again, _ = trainer.model(ex.src, ex.tgt_in)
    assert torch.equal(logits, again)  # a test's draw is kept


@pytest.mark.parametrize("scheme", ["abacus", "coupling"])
def test_abacus_and_coupling_train_on_index_hints_and_decode_alike_with_and_without_cache(
    tmp_path, scheme
):
    trainer = tiny_addition(
        tmp_path, scheme=scheme, index_hints=12, pad_width=5, train_digits=5, batch_size=8
    )
    assert all(trainer.step() > 0 for _ in range(2))
    trainer.model.eval()
    ex = format_task(
        "addition", torch.randint(0, 10, (6, 9)), torch.randint(0, 10, (6, 9)), 9, trainer.cfg.form
    )
    steps = ex.tgt_out.shape[1]
    decoded = trainer.model.greedy(ex.src, steps)
    assert torch.equal(decoded, trainer.model.greedy(ex.src, steps, use_cache=False))


@pytest.mark.parametrize("scheme", ["vanilla", "fire", "alibi", "coupling", "abacus"])
def test_a_row_of_a_mixed_length_batch_reads_as_it_would_alone(tmp_path, scheme):
    trainer = tiny_addition(
        tmp_path, scheme=scheme, varied=True, batch_lengths="mixed", train_digits=6, batch_size=32
    )
    batch = trainer.batch()
    lengths = (batch.src != PAD).sum(1)
    assert len(lengths.unique()) > 2 and (batch.src[:, -1] != PAD).all()  # prompts end together
    assert all(trainer.step() > 0 for _ in range(2))
    trainer.model.eval()
    short, long = (
        format_task("addition", torch.randint(0, 10, (3, n)), torch.randint(0, 10, (3, n)), n)
        for n in (2, 5)
    )
    both = mixed([short, long])
    assert (both.src[:3, : long.src.shape[1] - short.src.shape[1]] == PAD).all()
    with torch.no_grad():
        padded, _ = trainer.model(both.src, both.tgt_in)
        alone, _ = trainer.model(short.src, short.tgt_in)
    assert torch.allclose(padded[:3, : short.tgt_in.shape[1]], alone, atol=1e-5)


@pytest.mark.parametrize(
    "change, message",
    [
        ({"scheme": "vanilla", "window": 1}, "index-hints put a token between digits"),
        ({"task": "multiply"}, "index-hints writes successor, addition, nx1"),
        ({"fire_positions": "randomized", "scheme": "random"}, "FIRE's in the decoder-only"),
        ({"fire_positions": "randomized", "arch": "encoder-decoder"}, "FIRE's in the decoder-only"),
        ({"fire_positions": "drawn"}, "index or randomized"),
        ({"index_hints": 0, "batch_lengths": "mixed"}, "pads \\+varied prompts"),
        ({"index_hints": 0, "batch_lengths": "all"}, "one or mixed"),
    ],
)
def test_hints_and_randomized_fire_refuse_what_they_cannot_serve(change, message):
    settings = {"task": "addition", "arch": "decoder", "scheme": "fire", "index_hints": 30}
    with pytest.raises(ConfigError, match=message):
        RunConfig(**{**settings, **change})


@pytest.mark.integration
@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
@pytest.mark.parametrize("scheme", NEW)
def test_each_new_scheme_trains_and_decodes_in_both_models(tmp_path, arch, scheme):
    trainer = Trainer(
        RunConfig(
            task="addition",
            arch=arch,
            scheme=scheme,
            preset="tiny",
            pad_width=8,
            steps=3,
            batch_size=16,
            valid_size=20,
        ),
        str(tmp_path),
    )
    losses = [trainer.step() for _ in range(3)]
    assert all(loss > 0 for loss in losses)
    trainer.model.eval()
    ex = addition(digits=30, pad=34, n=8)  # far past the training frame
    steps = ex.tgt_out.shape[1]
    assert torch.equal(
        trainer.model.greedy(ex.src, steps), trainer.model.greedy(ex.src, steps, use_cache=False)
    )


@pytest.mark.parametrize("arch", ["encoder-decoder", "decoder"])
@pytest.mark.parametrize("task, levels", [("multiadd", 2), ("multiply", 3)])
def test_coupling_levels_train_and_decode_past_the_training_frame(tmp_path, arch, task, levels):
    trainer = Trainer(
        RunConfig(
            task=task,
            arch=arch,
            scheme="coupling",
            coupling_levels=levels,
            preset="tiny",
            pad_width=3,
            train_digits=3,
            steps=2,
            batch_size=8,
            valid_size=10,
        ),
        str(tmp_path),
    )
    assert all(trainer.step() > 0 for _ in range(2))
    trainer.model.eval()
    a = torch.randint(
        0, 10, (4, 12, 9) if task == "multiadd" else (4, 9)
    )  # 3× the digits (and 12 operands)
    ex = format_task(task, a, None if task == "multiadd" else torch.randint(0, 10, (4, 9)), 9)
    steps = ex.tgt_out.shape[1]
    assert torch.equal(
        trainer.model.greedy(ex.src, steps), trainer.model.greedy(ex.src, steps, use_cache=False)
    )
