"""N×M multiplication: the scratchpad of partial sums against Python integers, its test sets
(equal and unequal operand lengths, seeded), a cell through the command line, and ABC refused
in one line until its lines exist."""

import json

import torch
from typer.testing import CliRunner

from abcmini.tasks import Pool, detokenize, extrapolation_operands, format_task, sequence_lengths, training_operands
from cli import app


def value(digit_row) -> int:
    return int("".join(map(str, digit_row.tolist())))


def test_the_worked_example_and_random_products_are_partial_sums():
    ex = format_task("multiply", torch.tensor([[1, 2]]), torch.tensor([[3, 4]]), 2)
    assert detokenize(ex.src[0]) == "$12*34&" and detokenize(ex.tgt_out[0]) == "8400+8040&"
    generator = torch.Generator().manual_seed(0)
    a, b = (torch.randint(10, (40, 6), generator=generator) for _ in range(2))
    ex = format_task("multiply", a, b, 9)
    assert (ex.src.shape[1], ex.tgt_in.shape[1]) == sequence_lengths("multiply", 9)
    for row in range(40):
        x, y = value(a[row]), value(b[row])
        blocks = detokenize(ex.tgt_out[row])[:-1].split("+")
        assert len(blocks) == 9 and all(len(block) == 18 for block in blocks)
        assert [int(block[::-1]) for block in blocks] == [x * (y % 10 ** (j + 1)) for j in range(9)]
        assert int(blocks[-1][::-1]) == x * y


def test_training_draws_both_operands_from_the_pool_or_up_to_the_training_length():
    pool = Pool.make(0)
    a, b = training_operands("multiply", pool.train, 64, torch.Generator().manual_seed(1))
    train = set(pool.train.tolist())
    assert a.shape == b.shape == (64, 7) and {value(x) for x in torch.cat([a, b])} <= train
    a, b = training_operands("multiply", pool.train, 64, torch.Generator().manual_seed(1), digits=4)
    assert a.shape == b.shape == (64, 4) and len({value(x) for x in b}) > 20


def test_a_test_set_holds_l_by_l_products_and_products_of_unequal_lengths_either_way():
    a, b = extrapolation_operands("multiply", 14, seed=2)
    assert a.shape == b.shape == (10_000, 14)
    length = lambda x: len(str(value(x)))  # noqa: E731
    la, lb = torch.tensor([length(x) for x in a]), torch.tensor([length(x) for x in b])
    assert ((la == 14) & (lb == 14))[:5000].all()
    unequal = (la != lb)[5000:]
    assert unequal.all() and ((la < 14)[5000:].sum() > 2000) and ((lb < 14)[5000:].sum() > 2000)
    assert set(torch.minimum(la, lb)[5000:].tolist()) == set(range(1, 14))
    again, _ = extrapolation_operands("multiply", 14, seed=2)
    assert torch.equal(a, again) and not torch.equal(a, extrapolation_operands("multiply", 14, seed=3)[0])


def test_abc_on_multiply_is_refused_in_one_line_before_any_training(empty_cwd):
    result = CliRunner().invoke(app, ["train", "--task", "multiply", "--method", "abc", "--no-wandb", "--out", "cell"])
    assert result.exit_code == 2 and "no lines for multiply" in result.output
    assert len(result.output.strip().splitlines()) == 1 and not (empty_cwd / "cell").exists()


def test_a_vanilla_cell_on_multiply_trains_and_scores_the_product_alone(empty_cwd):
    result = CliRunner().invoke(app, ["train", "--recipe", "quick", "--task", "multiply", "--method", "vanilla", "--preset", "tiny",
                                      "--pad-width", "4", "--train-digits", "3", "--steps", "3", "--lengths", "2,4", "--no-wandb",
                                      "--out", "cell"])
    assert result.exit_code == 0, result.output
    record = json.loads((empty_cwd / "cell" / "eval.json").read_text())
    assert set(record["final_accuracy"]) == {"2", "4"} and "operands" not in record
    assert all(record["final_accuracy"][n] >= record["accuracy"][n] for n in ("2", "4"))
