"""abcmini's speed, each number measured side by side against its baseline in this one run.

    python benchmarks/bench.py [--only throughput,decode,calibration,eval,mask,screen,fire,prompt,final,zhou,heatmaps]

1. training throughput (tokens/s, forward + backward + Adam) of our Transformer against
   ``torch.nn.Transformer`` with the same configuration (the ``cpu`` preset, pre-LN, GELU), and
   of the decoder-only model (``arch: decoder``, two causal layers per decoder layer) on the same tokens;
2. cached against uncached greedy decoding of 60-digit Successor inputs (``paper`` preset), with
   a check that both produce the same tokens;
3. vectorized ABC calibration against a straightforward per-cell loop of the same algorithm
   (kept here only, as the baseline), on paper-size attention tensors, with a check that both
   give the same bias;
4. the full extrapolation suite: 10,000 samples at each of 6, 10, 15, 20, 60 digits
   (fixed pad width 64, ``cpu`` preset), exact match in one teacher-forced pass (what ``eval``
   does) against greedy decoding with the KV cache;
5. the attention mask layout the model gives ``scaled_dot_product_attention`` (``[1 h q k]``)
   against the ``[h q k]`` layout of a per-head bias (ABS windows, ABC, ALiBi), forward +
   backward at the recipe's attention shapes: only the first keeps PyTorch's fused CPU kernel;
6. exact match with the screen of the first answer rows against the whole pass alone, in the
   decoder-only model on long Successor inputs: where every answer goes wrong early (a fresh
   model on the real targets) and where every answer is right (the model's own greedy answers
   as targets, the screen's worst case), with a check that both give the same verdicts;
7. FIRE's test bias built once for a whole test against rebuilt for every batch (what a
   500-digit test did before: its batches hold tens of numbers), in the decoder-only model on
   500-digit Addition, with a check that both give the same verdicts;
8. a scaffolded decoder-only model's test pass with its prompt rows as their own values against
   every row's softmax over the whole sequence, 500-digit Addition, with a check of the argmaxes;
9. the final-number score of a block task (greedy decoding of every wrong output) in batches
   sized for greedy decoding (one query row a step) against batches sized for a whole
   teacher-forced pass, 35-digit multiadd (25 operands), with a check that both agree;
10. a training step of FIRE as Zhou et al.'s recipe (reversed operands, index hints, FIRE over
   randomized positions: ``recipes/own-papers-authors.yaml``) against one of FIRE alone
   (``recipes/own-papers.yaml``), the same cell, interleaved;
11. a tracked run's attention picture (``heatmap_grid``: every head's panel in one image on one
   pair of axes) against a grid of one axes per head with its own ticks (kept here only, as the
   baseline), drawn and written as PNG as wandb does, at a 7- and a 100-digit input.

Speed does not depend on the weights, so models are freshly initialised.
"""

import argparse
import math
import statistics
import tempfile
import time

import torch
import torch.nn.functional as F
from torch import nn

from abcmini.evaluate import exact_match, final_accuracy
from abcmini.experiment import Cell, RunConfig, resolve
from abcmini.limits import batch_for
from abcmini.nn.calibrate import calibrate
from abcmini.nn.config import PRESETS, ModelConfig
from abcmini.nn.decoder import DecoderOnly
from abcmini.nn.lines import NEG_INF
from abcmini.nn.model import Transformer
from abcmini.nn.positions import sinusoidal
from abcmini.nn.windows import Window
from abcmini.recipes import load_recipe
from abcmini.tasks import (
    VOCAB,
    Pool,
    extrapolation_operands,
    format_task,
    operand_count,
    sample_operands,
)
from abcmini.train import Trainer

DIRECTIONS, MIN_SUPPORT = (1, -1, 0), 0.5  # the directions and support rule both calibrations use


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


# ---------------------------------------------------------------- 1. training throughput


class TorchTransformer(nn.Module):
    """The same model built from ``torch.nn.Transformer`` (embedding + sinusoidal PE + head)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.embed = nn.Embedding(len(VOCAB), cfg.d_model)
        self.core = nn.Transformer(
            cfg.d_model,
            cfg.heads,
            cfg.enc_layers,
            cfg.dec_layers,
            cfg.d_ff,
            cfg.dropout,
            activation="gelu",
            batch_first=True,
            norm_first=True,
        )
        self.to_logits = nn.Linear(cfg.d_model, len(VOCAB))

    def forward(self, src, tgt_in):
        embed = lambda t: (
            self.embed(t) + sinusoidal(torch.arange(t.shape[1]), self.embed.embedding_dim)
        )  # noqa: E731
        mask = nn.Transformer.generate_square_subsequent_mask(tgt_in.shape[1])
        return self.to_logits(
            self.core(embed(src), embed(tgt_in), tgt_mask=mask, tgt_is_causal=True)
        ), None


def training_throughput(rounds: int, steps: int) -> None:
    cfg = ModelConfig(**PRESETS["cpu"])
    torch.manual_seed(0)
    models = {
        "abcmini": Transformer(cfg),
        "torch.nn.Transformer": TorchTransformer(cfg),
        "abcmini decoder-only": DecoderOnly(RunConfig(arch="decoder", preset="cpu").model_config()),
    }
    a, b = sample_operands("addition", Pool.make(0).train, 128, torch.Generator().manual_seed(0))
    batch = format_task("addition", a, b, 20)
    tokens = batch.src.numel() + batch.tgt_in.numel()

    def train_steps(model, optimizer):
        for _ in range(steps):
            logits, _ = model(batch.src, batch.tgt_in)
            loss = nn.functional.cross_entropy(logits.flatten(0, 1), batch.tgt_out.flatten())
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    optimizers = {name: torch.optim.Adam(m.parameters(), 1e-3) for name, m in models.items()}
    for name, model in models.items():
        train_steps(model, optimizers[name])  # warm-up
    times = {name: [] for name in models}
    for _ in range(rounds):  # alternate, so all see the same machine
        for name, model in models.items():
            start = time.perf_counter()
            train_steps(model, optimizers[name])
            times[name].append(time.perf_counter() - start)
    rate = {name: tokens * steps / statistics.median(t) for name, t in times.items()}
    print(
        f"1. training throughput, Addition pad 20, batch 128 ({tokens} tokens/step), cpu preset, {torch.get_num_threads()} threads:"
    )
    print(
        "   "
        + "   ".join(
            f"{name} {r:,.0f} tokens/s ({r / rate['abcmini']:.2f}x)" for name, r in rate.items()
        )
    )


# ---------------------------------------------------------------- 2. KV cache


def decoding(samples: int, repeats: int) -> None:
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**PRESETS["paper"])).eval()
    a, _ = extrapolation_operands("successor", 60, 0)
    example = format_task("successor", a[:samples], None, 60)
    steps = example.tgt_out.shape[1]
    cached_s, cached = timed(lambda: model.greedy(example.src, steps, use_cache=True), repeats)
    uncached_s, uncached = timed(lambda: model.greedy(example.src, steps, use_cache=False), repeats)
    assert torch.equal(cached, uncached), "cached and uncached decoding disagree"
    print(
        f"2. greedy decoding, {samples} Successor inputs at 60 digits ({steps} steps), paper preset, {torch.get_num_threads()} threads:"
    )
    print(
        f"   uncached {uncached_s:.2f} s   cached {cached_s:.2f} s   speed-up {uncached_s / cached_s:.1f}x"
    )


# ---------------------------------------------------------------- 3. calibration


def calibrate_per_cell(
    attention: torch.Tensor,
    kappa: float,
    n_q: int,
    n_k: int,
    right: bool = True,
    as_lists: bool = False,
) -> torch.Tensor:
    """The same algorithm written cell by cell (the baseline): line sums, support, dropoff, the
    last-row rule, extension, merge.

    It reads the tensor cell by cell, as the authors' implementation does; ``as_lists`` first
    copies it into Python lists, the fastest a per-cell loop gets."""
    heads, m, n = attention.shape
    A = attention.tolist() if as_lists else attention
    out = [[[NEG_INF] * n_k for _ in range(n_q)] for _ in range(heads)]
    for h in range(heads):
        for delta in DIRECTIONS:
            line = lambda i, j, cols: j - delta * i - (cols - 1 if right and delta <= 0 else 0)  # noqa: E731
            sums, counts = {}, {}
            for i in range(m):
                for j in range(n):
                    key = line(i, j, n)
                    sums[key] = sums.get(key, 0.0) + float(A[h][i][j])
                    counts[key] = counts.get(key, 0) + 1
            d = {key: sums[key] / counts[key] for key in sums if counts[key] >= MIN_SUPPORT * m}
            mu = sum(d.values()) / len(d)
            sigma = math.sqrt(sum((x - mu) ** 2 for x in d.values()) / len(d))
            d_max = max(d.values())
            last_row = {line(m - 1, j, n) for j in range(n)}
            for i in range(n_q):
                for j in range(n_k):
                    key = line(i, j, n_k)
                    if key in d and key in last_row and d[key] > mu + kappa * sigma:
                        out[h][i][j] = max(out[h][i][j], d[key] - d_max)
        if all(v == NEG_INF for row in out[h] for v in row):
            out[h] = [[0.0] * n_k for _ in range(n_q)]
        for row in out[h]:
            if all(v == NEG_INF for v in row):
                row[0] = 0.0
    return torch.tensor(out)


def calibration(repeats: int) -> None:
    torch.manual_seed(0)
    scores = torch.randn(8, 62, 125)
    scores[:, torch.arange(62), 124 - torch.arange(62)] += (
        6.0  # a clear anti-diagonal, as in a trained model
    )
    cross = scores.softmax(-1)
    vectorized_s, fast = timed(
        lambda: calibrate(cross, 4.5, DIRECTIONS, min_support=MIN_SUPPORT)(62, 125), repeats
    )
    loop_s, slow = timed(lambda: calibrate_per_cell(cross, 4.5, 62, 125), max(1, repeats // 10))
    lists_s, slow_lists = timed(
        lambda: calibrate_per_cell(cross, 4.5, 62, 125, as_lists=True), max(1, repeats // 10)
    )
    for other in (slow, slow_lists):
        assert torch.allclose(fast, other, atol=1e-5) and torch.equal(
            fast.isinf(), other.isinf()
        ), "the calibrations disagree"
    print(
        f"3. ABC calibration + materialization, cross-attention [8, 62, 125], directions {DIRECTIONS}, {torch.get_num_threads()} threads:"
    )
    print(
        f"   per-cell loop over the tensor {1000 * loop_s:.0f} ms ({loop_s / vectorized_s:.0f}x)   same loop over Python lists "
        f"{1000 * lists_s:.0f} ms ({lists_s / vectorized_s:.0f}x)   vectorized {1000 * vectorized_s:.2f} ms"
    )


# ---------------------------------------------------------------- 4. evaluation suite


def evaluation_suite() -> None:
    """The suite as ``eval`` runs it (exact match in one teacher-forced pass per batch) against
    greedy decoding with the KV cache, length by length, on the same inputs."""
    torch.manual_seed(0)
    model = Transformer(ModelConfig(**{**PRESETS["cpu"], "enc_layers": 0})).eval()
    lengths, one_pass, decoded = (6, 10, 15, 20, 60), [], []
    for length in lengths:
        a, _ = extrapolation_operands("successor", length, 0)
        example = format_task("successor", a, None, 64)
        one_pass.append(timed(lambda: exact_match(model, example), 1)[0])
        decoded.append(timed(lambda: greedy_exact_match(model, example), 1)[0])
    print(
        f"4. extrapolation suite, Successor, 10,000 samples at each of {lengths} digits, pad width 64, cpu preset, "
        f"{torch.get_num_threads()} threads:"
    )
    for name, parts in (
        ("one teacher-forced pass", one_pass),
        ("greedy decoding, KV cache", decoded),
    ):
        print(
            f"   {name:<26} {sum(parts):6.1f} s ("
            + ", ".join(f"{n}: {t:.1f} s" for n, t in zip(lengths, parts))
            + ")"
        )
    print(f"   speed-up {sum(decoded) / sum(one_pass):.1f}x")


@torch.no_grad()
def greedy_exact_match(model, example, batch_size: int = 1000) -> torch.Tensor:
    steps, hits = example.tgt_out.shape[1], []
    for start in range(0, len(example.src), batch_size):
        tokens = model.greedy(example.src[start : start + batch_size], steps)
        hits.append((tokens == example.tgt_out[start : start + batch_size]).all(dim=1))
    return torch.cat(hits)


# ---------------------------------------------------------------- 5. attention mask layout


def mask_layout(repeats: int) -> None:
    """Fused against unfused attention: the same scores and scaffold, a 4-D or a 3-D mask."""
    print(
        f"5. attention with an ABS window bias, batch 128, cpu preset (4 heads x 16), forward + backward, "
        f"{torch.get_num_threads()} threads:"
    )
    for name, n_q, n_k, binary, which in (
        ("Successor cross", 66, 65, False, 1),
        ("Addition cross", 66, 131, True, 1),
        ("Parity self", 214, 214, False, 0),
        ("Parity cross", 214, 214, False, 1),
    ):
        window = Window(1, binary)(n_q, n_k)[which]  # [1 q k]
        bias = window.expand(
            4, n_q, n_k
        ).contiguous()  # [h q k], as a calibrated or ALiBi bias comes
        q, k, v = (torch.randn(128, 4, n, 16, requires_grad=True) for n in (n_q, n_k, n_k))

        def step(mask):
            F.scaled_dot_product_attention(q, k, v, attn_mask=mask).sum().backward()

        old, new = [], []
        for _ in range(repeats):  # interleaved, so both see the same machine
            old.append(timed(lambda: step(bias), 1)[0])
            new.append(timed(lambda: step(bias[None]), 1)[0])
        old_s, new_s = statistics.median(old), statistics.median(new)
        print(
            f"   {name:<16} [{n_q} x {n_k}]   [h q k] {1000 * old_s:6.1f} ms   [1 h q k] {1000 * new_s:6.1f} ms   "
            f"speed-up {old_s / new_s:.1f}x"
        )


# ---------------------------------------------------------------- 6. the screened exact match


def screened_exact_match(samples: int, batch_size: int) -> None:
    """``exact_match`` with its screen of 16 rows against ``screen_rows=0``, interleaved."""
    torch.manual_seed(0)
    model = DecoderOnly(RunConfig(arch="decoder", preset="cpu").model_config()).eval()
    print(
        f"6. exact match in the decoder-only model (cpu preset), Successor, {samples} numbers in batches of {batch_size}, "
        f"{torch.get_num_threads()} threads:"
    )
    for length, own in ((100, False), (500, False), (100, True)):
        a, _ = extrapolation_operands("successor", length, 0)
        example = format_task("successor", a[:samples], None, length + 5)
        if own:  # the model's own greedy answers: every one right, so the screen lets all through
            answers = torch.cat(
                [
                    model.greedy(example.src[i : i + batch_size], example.tgt_out.shape[1])
                    for i in range(0, samples, batch_size)
                ]
            )
            example = type(example)(
                example.src, torch.cat([example.tgt_in[:, :1], answers[:, :-1]], dim=1), answers
            )
        whole, screened = (
            timed(lambda: exact_match(model, example, batch_size, screen_rows=0), 1),
            timed(lambda: exact_match(model, example, batch_size), 1),
        )
        assert torch.equal(whole[1], screened[1])
        print(
            f"   {length} digits, {'its own answers (all right)' if own else 'the real targets'} ({100 * whole[1].float().mean():.0f}% right): "
            f"whole pass {whole[0]:.1f} s   screened {screened[0]:.1f} s   ratio {whole[0] / screened[0]:.2f}x"
        )


# ---------------------------------------------------------------- 7. FIRE's test bias


def fire_test_bias(samples: int, length: int = 500) -> None:
    """One ``exact_match`` over every batch (the bias built once) against one call per batch
    (each call's ``eval()`` forgets the bias, so every batch builds it), interleaved."""
    torch.manual_seed(0)
    cfg = RunConfig(
        arch="decoder", preset="cpu", task="addition", scheme="fire", pad_width=12, varied=True
    )
    model = DecoderOnly(cfg.model_config()).eval()
    frame = length  # a +varied run's test frame
    batch = batch_for(cfg, frame, 1000)
    a, b = extrapolation_operands("addition", length, 0)
    example = format_task("addition", a[:samples], b[:samples], frame)
    parts = lambda: [
        type(example)(
            example.src[i : i + batch],
            example.tgt_in[i : i + batch],
            example.tgt_out[i : i + batch],
        )  # noqa: E731
        for i in range(0, samples, batch)
    ]
    per_batch = timed(lambda: torch.cat([exact_match(model, part, batch) for part in parts()]), 1)
    once = timed(lambda: exact_match(model, example, batch), 1)
    assert torch.equal(per_batch[1], once[1])
    print(
        f"7. FIRE in the decoder-only model (cpu preset), Addition at {length} digits, {samples} numbers in batches of {batch}, "
        f"{torch.get_num_threads()} threads: built every batch {per_batch[0]:.1f} s   built once {once[0]:.1f} s   "
        f"ratio {per_batch[0] / once[0]:.2f}x"
    )


# ---------------------------------------------------------------- 8. a scaffolded decoder-only test pass


def prompt_rows(samples: int, length: int = 500) -> None:
    """A test pass of a scaffolded decoder-only model, its prompt rows as their own values (eval)
    against every row's softmax over the whole sequence (train mode: dropout 0 in this preset,
    NoPE, so the same function computed as before), interleaved, with a check of the argmaxes."""
    torch.manual_seed(0)
    cfg = RunConfig(arch="decoder", preset="cpu", task="addition", scheme="nope", pad_width=12)
    model = DecoderOnly(cfg.model_config(), Window(1))
    frame = length + 5
    batch = batch_for(cfg, frame, 1000)
    a, b = extrapolation_operands("addition", length, 0)
    example = format_task("addition", a[:samples], b[:samples], frame)

    def passes(train: bool):
        model.train(train)
        with torch.no_grad():
            return torch.cat(
                [
                    model(example.src[i : i + batch], example.tgt_in[i : i + batch])[0].argmax(-1)
                    for i in range(0, samples, batch)
                ]
            )

    full, own = timed(lambda: passes(True), 1), timed(lambda: passes(False), 1)
    assert torch.equal(full[1], own[1])
    print(
        f"8. a scaffolded (ABS w = 1) decoder-only test pass (cpu preset), Addition at {length} digits, {samples} numbers "
        f"in batches of {batch}, {torch.get_num_threads()} threads: every row's attention {full[0]:.1f} s   "
        f"prompt rows as their values {own[0]:.1f} s   ratio {full[0] / own[0]:.2f}x"
    )


def final_number(samples: int, length: int = 35) -> None:
    """``final_accuracy`` over ``samples`` wrong outputs of a fresh multiadd model (every output
    is re-decoded), in the batches ``evaluate`` gives it against those of the teacher-forced pass."""
    torch.manual_seed(0)
    cfg = RunConfig(task="multiadd", preset="cpu", scheme="nope", pad_width=10)
    model = Transformer(cfg.model_config()).eval()
    frame, operands = length + 3, operand_count(length)
    a, _ = extrapolation_operands("multiadd", length, 0)
    example = format_task("multiadd", a[:samples], None, frame)
    misses = torch.zeros(samples, dtype=torch.bool)
    whole, greedy = (
        batch_for(cfg, frame, 1000, operands),
        batch_for(cfg, frame, 1000, operands, rows=1),
    )
    small, large = (
        timed(lambda: final_accuracy(model, example, misses, whole), 1),
        timed(lambda: final_accuracy(model, example, misses, greedy), 1),
    )
    assert small[1] == large[1]
    print(
        f"9. the final-number score, multiadd at {length} digits ({operands} operands), {samples} wrong outputs, "
        f"{torch.get_num_threads()} threads: batches of {whole} {small[0]:.1f} s   batches of {greedy} {large[0]:.1f} s   "
        f"ratio {small[0] / large[0]:.2f}x"
    )


# ---------------------------------------------------------------- 10. Zhou et al.'s recipe


def zhou_step(rounds: int, steps: int) -> None:
    """Training steps of FIRE with Zhou et al.'s format against FIRE alone, Addition in its
    own paper's shape, ``rounds`` times ``steps`` of each in turn."""
    trainers = {
        name: Trainer(
            resolve(load_recipe(f"recipes/{name}.yaml"), Cell("addition", "fire+varied", 0)).run,
            tempfile.mkdtemp(),
        )
        for name in ("own-papers", "own-papers-authors")
    }
    spent = dict.fromkeys(trainers, 0.0)
    for _ in range(rounds):
        for name, trainer in trainers.items():
            spent[name] += timed(lambda: [trainer.step() for _ in range(steps)], 1)[0]
    alone, zhou = spent["own-papers"], spent["own-papers-authors"]
    print(
        f"10. {rounds * steps} training steps of FIRE on Addition (1-10 digits, batch 128), "
        f"{torch.get_num_threads()} threads: Zhou et al.'s recipe {zhou:.1f} s   FIRE alone "
        f"{alone:.1f} s   ratio {zhou / alone:.2f}x"
    )


# ---------------------------------------------------------------- 11. heatmaps


def heatmap_per_axes(maps: torch.Tensor, tokens: str | None):
    """The baseline: one axes per head, each with its own ticks, labels and title."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 4, figsize=(12, 6), squeeze=False)
    fig.subplots_adjust(left=0.1, right=0.8, bottom=0.14, top=0.85, wspace=0.25, hspace=0.45)
    for h, ax in enumerate(axes.flat):
        image = ax.imshow(maps[h].numpy(), aspect="auto", interpolation="nearest")
        ax.set_title(f"head {h}", fontsize=9)
        ax.set_ylabel("output digit", fontsize=8)
        ax.set_xlabel("input token", fontsize=8)
        if tokens is not None:
            ax.set_xticks(range(len(tokens)), list(tokens), fontsize=6)
        ax.tick_params(labelsize=6)
    fig.colorbar(image, cax=fig.add_axes([0.84, 0.15, 0.02, 0.65]))
    return fig


def heatmaps(repeats: int) -> None:
    """``heatmap_grid`` against ``heatmap_per_axes``, each drawn and written to PNG, interleaved."""
    import io

    from abcmini.outputs.figures import close, heatmap_grid

    for digits, tokens in ((7, "$1234567+7654321="), (100, None)):
        keys = 2 * digits + 3
        maps = torch.softmax(torch.randn(8, digits + 1, keys), -1)
        draw = {
            "one image": lambda: heatmap_grid(maps, "t", "output digit", "input token", tokens),
            "per axes": lambda: heatmap_per_axes(maps, tokens),
        }
        spent = dict.fromkeys(draw, 0.0)
        for _ in range(repeats):
            for name, make in draw.items():
                start = time.perf_counter()
                fig = make()
                fig.savefig(io.BytesIO(), format="png")
                close(fig)
                spent[name] += time.perf_counter() - start
        one, per = (spent[name] / repeats for name in draw)
        print(
            f"11. attention picture of 8 heads, {digits}-digit input ({digits + 1} x {keys}), "
            f"drawn and written as PNG: one image {one:.2f} s   per axes {per:.2f} s   "
            f"ratio {per / one:.2f}x"
        )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--only",
        default="throughput,decode,calibration,eval,mask,screen,fire,prompt,final,zhou,heatmaps",
    )
    parser.add_argument("--decode-samples", type=int, default=200)
    args = parser.parse_args()
    wanted = args.only.split(",")
    if "throughput" in wanted:
        training_throughput(rounds=5, steps=5)
    if "decode" in wanted:
        decoding(args.decode_samples, repeats=1)
    if "calibration" in wanted:
        calibration(repeats=20)
    if "eval" in wanted:
        evaluation_suite()
    if "mask" in wanted:
        mask_layout(repeats=5)
    if "screen" in wanted:
        screened_exact_match(samples=2000, batch_size=500)
    if "fire" in wanted:
        fire_test_bias(samples=400)
    if "prompt" in wanted:
        prompt_rows(samples=200)
    if "final" in wanted:
        final_number(samples=62)
    if "zhou" in wanted:
        zhou_step(rounds=6, steps=5)
    if "heatmaps" in wanted:
        heatmaps(repeats=10)


if __name__ == "__main__":
    main()
