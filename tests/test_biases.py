import torch

from abcmini.nn.scaffolds import layer_biases
from abcmini.nn.windows import Window, window_cross_bias, window_self_bias
from abcmini.tasks import Form, detokenize, format_task

O, X = 0.0, float("-inf")


def test_self_window_is_the_diagonal_and_w_below():
    expected = torch.tensor(
        [
            [O, X, X, X, X],
            [O, O, X, X, X],
            [O, O, O, X, X],
            [X, O, O, O, X],
            [X, X, O, O, O],
        ]
    )
    assert torch.equal(window_self_bias(5, 5, 2), expected)
    assert torch.equal(window_self_bias(3, 3, 0), torch.tensor([[O, X, X], [X, O, X], [X, X, O]]))


def test_unary_cross_window_follows_the_anti_diagonal_from_the_least_significant_digit():
    # "$ d4 d3 d2 d1" (d1 at column 4): row t reads output digit t, is centred on input digit t
    # (digit 0 lies just past the end) and sees w = 1 digit on each side.
    expected = torch.tensor(
        [
            [X, X, X, X, O],  # t=0 (SOS, emits digit 1): d1 only, the newest digit of its window
            [X, X, X, O, O],  # t=1: d2 d1
            [X, X, O, O, O],  # t=2: d3 d2 d1
            [X, O, O, O, X],
            [O, O, O, X, X],  # t=4: $ d4 d3 (emits the final carry)
            [O, O, X, X, X],  # t=5: $ d4 (emits EOS)
            [O, X, X, X, X],  # t=6: window past the input: column 0 opened (no-NaN rule)
        ]
    )
    assert torch.equal(window_cross_bias(7, 5, 1), expected)
    w0 = window_cross_bias(7, 5, 0)
    assert torch.equal(
        w0[0], torch.tensor([X, X, X, X, O])
    )  # centre past the end: nearest key, the last
    assert torch.equal(
        w0[1:],
        torch.tensor(
            [
                [X, X, X, X, O],
                [X, X, X, O, X],
                [X, X, O, X, X],
                [X, O, X, X, X],
                [O, X, X, X, X],
                [O, X, X, X, X],
            ]
        ),
    )
    ex = format_task("successor", torch.tensor([[4, 0, 9]]), None, 3)
    src = detokenize(ex.src[0])
    assert src == "$409"
    cross = window_cross_bias(ex.tgt_out.shape[1], ex.src.shape[1], 1)
    assert ["".join(src[j] for j in range(4) if cross[t, j] == 0) for t in range(5)] == [
        "9",
        "09",
        "409",
        "$40",
        "$4",
    ]


def test_binary_cross_window_spans_and_steps_two_columns():
    # "+ a2 b2 a1 b1 a0 b0" (7 columns); row t reads the pair (a_t, b_t) ± w columns.
    expected_w0 = torch.tensor(
        [
            [X, X, X, X, X, O, O],
            [X, X, X, O, O, X, X],
            [X, O, O, X, X, X, X],
            [O, X, X, X, X, X, X],  # past the last pair: column 0 (the operator), no-NaN rule
        ]
    )
    assert torch.equal(window_cross_bias(4, 7, 0, binary=True), expected_w0)
    expected_w1 = torch.tensor(
        [
            [X, X, X, X, O, O, O],
            [X, X, O, O, O, O, X],
            [O, O, O, O, X, X, X],
            [O, O, X, X, X, X, X],
        ]
    )
    assert torch.equal(window_cross_bias(4, 7, 1, binary=True), expected_w1)


def test_no_row_is_ever_all_closed():
    for n_q in range(1, 30, 3):
        for n_k in range(1, 30, 4):
            for w in range(4):
                for binary in (False, True):
                    assert (window_cross_bias(n_q, n_k, w, binary) == 0).any(dim=1).all()
                assert (window_self_bias(n_q, n_q, w) == 0).any(dim=1).all()


def test_window_rows_agree_across_sizes_anchored_at_the_least_significant_end():
    small, large = window_cross_bias(8, 10, 1), window_cross_bias(20, 30, 1)
    # the right-hand (least significant) corners coincide for rows that stay inside the input
    assert torch.equal(small, large[:8, -10:])
    assert (large[:8, :-10] == float("-inf")).all()
    bias_self, bias_cross = layer_biases(Window(1, binary=True), 5, 9)[0]
    assert bias_self.shape == (1, 5, 5) and bias_cross.shape == (1, 5, 9)


def test_aligned_inputs_put_each_pair_under_its_window():
    ex = format_task(
        "addition", torch.tensor([[1, 2, 3]]), torch.tensor([[7, 4, 8]]), 3, Form(aligned=True)
    )
    assert detokenize(ex.src[0]) == "+172438"
    cross = window_cross_bias(ex.tgt_out.shape[1], ex.src.shape[1], 0, binary=True)
    src = detokenize(ex.src[0])
    assert "".join(src[j] for j in range(7) if cross[0, j] == 0) == "38"  # least significant pair
    assert "".join(src[j] for j in range(7) if cross[2, j] == 0) == "17"
    nx1 = format_task("nx1", torch.tensor([[1, 2, 3]]), torch.tensor([7]), 3, Form(aligned=True))
    assert detokenize(nx1.src[0]) == "*172737"


def test_a_pair_window_counts_w_in_operand_pairs_with_the_emitted_pair_newest():
    """``pairs``: the unary window (digits t − w … t + w) with each digit a pair ``a_p b_p``; row
    t emits digit t + 1, whose pair is the newest it sees at w = 1. The column window instead
    opens half of pair t + 2 (its b) and half of pair t (its a)."""
    ex = format_task(
        "addition",
        torch.tensor([[1, 2, 3, 4]]),
        torch.tensor([[5, 6, 7, 8]]),
        4,
        Form(aligned=True),
    )
    src = detokenize(ex.src[0])
    assert src == "+15263748"
    n_q, n_k = ex.tgt_out.shape[1], ex.src.shape[1]

    def seen(bias, row):
        return "".join(src[j] for j in range(n_k) if bias[row, j] == 0)

    pairs, columns = (
        window_cross_bias(n_q, n_k, 1, binary=True, pairs=True),
        window_cross_bias(n_q, n_k, 1, binary=True),
    )
    assert [seen(pairs, t) for t in range(4)] == [
        "48",
        "3748",
        "263748",
        "152637",
    ]  # pairs t-1 … t+1
    assert [seen(columns, t) for t in range(4)] == ["748", "6374", "5263", "+152"]
    assert (
        seen(window_cross_bias(n_q, n_k, 0, binary=True, pairs=True), 2) == "37"
    )  # w = 0: pair t alone, as the unary digit t
    for n_q in range(1, 20, 3):
        for n_k in range(1, 20, 4):
            assert (
                (window_cross_bias(n_q, n_k, 2, True, pairs=True) == 0).any(dim=1).all()
            )  # the no-NaN rule holds
