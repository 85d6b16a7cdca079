"""What Addition NoPE+w=1 can know: ``python lab/window_information.py LAYERS LENGTH [N]``.

With the pair window (w = 1) and no positional encoding, decoder row ``t`` (emitting answer digit
``t + 1``) reads the digits of operand pairs ``t − 1 … t + 1`` as a multiset, and each decoder
layer's self-attention window adds the row before it: after ``LAYERS`` layers the row has seen the
multisets of rows ``t − LAYERS + 1 … t`` and the answer digits ``t − LAYERS … t``. This counts the
exact match a Bayes-optimal reader of exactly that would reach on N (default 1,000) random sums
of two LENGTH-digit numbers in a frame of LENGTH + 5 (the paper recipe's test frame): for each row
it enumerates every digit assignment consistent with what the row saw (an unknown carry into the
lowest pair taken as equally likely 0 or 1) and answers the digit most of them give.
docs/paper-gaps.md uses it. Pure Python, no model.
"""

import itertools
import random
from collections import Counter

from parse import call, parser  # lab/parse.py


def window(pairs: list, k: int) -> Counter:
    """The digits row ``k`` reads: pairs ``k − 1 … k + 1`` that exist (``pairs[0]`` is unused)."""
    return Counter(
        d for j in range(max(1, k - 1), min(len(pairs) - 1, k + 1) + 1) for d in pairs[j]
    )


def splits(digits: Counter, n: int):
    """Every way to deal ``digits`` into ``n`` unordered pairs, in order."""
    if n == 0:
        yield ()
        return
    for pair in {tuple(sorted(p)) for p in itertools.combinations(sorted(digits.elements()), 2)}:
        rest = digits - Counter(pair)
        for tail in splits(rest, n - 1):
            yield (pair, *tail)


def answer_digits(pairs: dict, low: int, top: int, carry: int) -> dict:
    out = {}
    for k in range(low, top + 1):
        total = sum(pairs[k]) + carry
        out[k], carry = total % 10, total // 10
    out[top + 1] = carry
    return out


def best_guess(pairs: list, answer: list, t: int, layers: int) -> int:
    """The answer digit ``t + 1`` most digit assignments consistent with row ``t``'s view give."""
    width = len(pairs) - 1
    first_row, top = max(0, t - layers + 1), min(width, t + 1)
    newest = list(range(max(1, t - 1), top + 1))
    votes = Counter()
    for dealt in splits(window(pairs, t), len(newest)):
        guess, ok = dict(zip(newest, dealt)), True
        for k in range(t - 1, first_row - 1, -1):  # row k's multiset fixes pair k − 1
            used = Counter(d for j in (k, k + 1) if j in guess for d in guess[j])
            rest, ok = window(pairs, k) - used, not used - window(pairs, k)
            ok &= sum(rest.values()) == (2 if k >= 2 else 0)
            if not ok:
                break
            if k >= 2:
                guess[k - 1] = tuple(sorted(rest.elements()))
        if not ok:
            continue
        low = min(guess)
        weight = 2 ** sum(p[0] != p[1] for p in guess.values())  # ordered (a, b) assignments
        for carry in (0,) if low == 1 else (0, 1):
            out = answer_digits(guess, low, top, carry)
            if all(out[k] == answer[k] for k in range(max(1, t - layers), t + 1)):
                votes[out[t + 1]] += weight
    return votes.most_common(1)[0][0]


def main(layers: int, length: int, samples: int = 1000) -> None:
    rng, exact, rows = random.Random(0), 0, Counter()
    width = length + 5
    for _ in range(samples):
        a, b = (
            [rng.randrange(10) for _ in range(length - 1)] + [rng.randrange(1, 10)] + [0] * 5
            for _ in range(2)
        )
        pairs = [None, *zip(a, b)]
        answer = [None, *answer_digits(dict(enumerate(pairs[1:], 1)), 1, width, 0).values()]
        right = [best_guess(pairs, answer, t, layers) == answer[t + 1] for t in range(width + 1)]
        exact += all(right)
        rows.update(t for t, r in enumerate(right) if not r)
    print(
        f"{layers} layers, {length} digits, {samples} sums: Bayes-optimal exact match {100 * exact / samples:.2f}%;"
        f" wrong rows {dict(sorted(rows.items()))}"
    )


if __name__ == "__main__":
    args = parser(__doc__)
    args.add_argument("layers", type=int)
    args.add_argument("length", type=int)
    args.add_argument("samples", type=int, nargs="?", default=1000)
    call(main, **vars(args.parse_args()))
