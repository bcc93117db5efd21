"""book_lib.inference against the worked numbers of Parts 7 and 8, and its refusals."""

import json
import math

import pytest

from book_lib import inference, serving, speculative, topology
from book_lib.hardware import get_chip
from book_lib.models import get_model

V5E = get_chip("tpu-v5e")


def test_llama2_13b_table_of_part_7():
    """Part 7's LLaMA 2 13B table on 8 v5e at 8192 tokens; the text used 8.2e11 B/s where the table says 8.1e11."""
    printed_ms = {1: 4.98, 8: 12.13, 16: 20.30, 32: 36.65, 64: 69.33, 240: 249.09}
    bandwidth_ratio = 8.2e11 / V5E.hbm_bytes_per_s
    for batch, ms in printed_ms.items():
        step = inference.decode_step_time("llama-2-13b", V5E, 8, batch=batch, context_len=8192)
        # Part 7: at larger batches reading the KV caches outweighs reading the weights. In the printed rows
        # from batch 8 the batch's caches (8 x 6.7 GB = 54 GB) outweigh the 26 GB of weights; the model
        # crosses at batch 4
        assert step.bound == ("weights" if batch == 1 else "kv"), batch
        assert step.t_kv + step.t_weights == pytest.approx(ms * 1e-3 * bandwidth_ratio, rel=0.02), batch
    crossing = [inference.decode_step_time("llama-2-13b", V5E, 8, batch=b, context_len=8192).bound for b in (3, 4)]
    assert crossing == ["weights", "kv"]
    assert inference.max_batch("llama-2-13b", V5E, 8, context_len=8192) == 16  # "We OOM beyond batch size 16"
    assert inference.decode_step_time("llama-2-13b", V5E, 8, batch=16, context_len=8192).fits
    assert not inference.decode_step_time("llama-2-13b", V5E, 8, batch=17, context_len=8192).fits


def test_llama3_70b_int8_on_v5e_part_8():
    """Part 8: int8 weights and KV, batch 32, 8192 tokens: 112 GB, a 2x4 slice, about 17 ms a step, half on a 4x4."""
    step = inference.decode_step_time(
        "llama-3-70b", V5E, 8, batch=32, context_len=8192, param_dtype="int8", kv_dtype="int8"
    )
    assert step.memory_bytes == pytest.approx(112e9, rel=0.02)
    assert step.t_kv + step.t_weights == pytest.approx(112e9 / (8 * 8.1e11), rel=0.02)
    assert step.bound == "weights"
    n = inference.min_chips("llama-3-70b", V5E, batch=32, context_len=8192, param_dtype="int8", kv_dtype="int8")
    assert topology.smallest_slice(V5E, n).shape == (2, 4)
    bigger = inference.decode_step_time(
        "llama-3-70b", V5E, 16, batch=32, context_len=8192, param_dtype="int8", kv_dtype="int8"
    )
    assert bigger.t_kv + bigger.t_weights == pytest.approx((step.t_kv + step.t_weights) / 2)
    assert bigger.tokens_per_s_per_chip == pytest.approx(step.tokens_per_s_per_chip, rel=0.1)


@pytest.mark.parametrize(("dtype", "shape"), [("bf16", (4, 4)), ("int8", (2, 4)), ("int4", (2, 2))])
def test_smallest_v5e_slice_for_llama3_70b_weights(dtype, shape):
    """Part 8: bf16 needs a 4x4, int8 a 4x2, int4 a 2x2 (KV caches neglected)."""
    n = inference.min_chips("llama-3-70b", V5E, batch=0, context_len=8192, param_dtype=dtype)
    assert topology.smallest_slice(V5E, n).shape == shape


def test_step_terms_follow_their_formulas():
    model = get_model("llama-3-8b")
    step = inference.decode_step_time(model, "h100", 1, batch=64, context_len=4096)
    assert step.t_ici == 0
    assert step.t_math == pytest.approx(2 * 64 * model.active_param_count() / get_chip("h100").bf16_flops_per_s)
    assert step.t_kv == pytest.approx(
        64 * 4096 * model.kv_cache_bytes_per_token("bf16") / get_chip("h100").hbm_bytes_per_s
    )
    assert step.t_lower == step.t_kv + max(step.t_weights, step.t_math)
    assert step.t_upper == pytest.approx(step.t_kv + step.t_weights + step.t_math)
    big = inference.decode_step_time(model, "h100", 1, batch=4096, context_len=128)
    assert big.bound == "math"  # above the critical batch the linears are compute-bound
    sharded = inference.decode_step_time(model, "h100", 8, batch=64, context_len=4096)
    assert sharded.t_ici > 0 and sharded.t_weights == pytest.approx(step.t_weights / 8)


def test_int8_math_halves_math_time_on_v5e():
    bf16 = inference.decode_step_time("llama-3-70b", V5E, 16, batch=256, context_len=1024, param_dtype="int8")
    int8 = inference.decode_step_time(
        "llama-3-70b", V5E, 16, batch=256, context_len=1024, param_dtype="int8", matmul_dtype="int8"
    )
    assert int8.t_math == pytest.approx(bf16.t_math * V5E.bf16_flops_per_s / V5E.int8_ops_per_s)


def test_prefill_is_forward_flops_at_peak():
    model = get_model("llama-3-70b")
    t = inference.prefill_time(model, V5E, 16, prompt_len=8192, batch=2, mfu=0.5)
    flops = 2 * 8192 * model.flops_per_token(8192, training=False, causal=True)
    assert t == pytest.approx(flops / (16 * V5E.bf16_flops_per_s * 0.5))
    assert flops / (2 * 8192) > 2 * model.param_count()  # attention adds to 2 N per token


def test_latency_throughput_moves_along_the_frontier():
    steps = inference.latency_throughput(
        "llama-3-70b", V5E, 16, context_len=2048, batches=[1, 8, 64, 512], param_dtype="int8"
    )
    latencies = [s.t_lower for s in steps]
    throughputs = [s.tokens_per_s_per_chip for s in steps]
    assert latencies == sorted(latencies) and throughputs == sorted(throughputs)


def test_cost_per_million_tokens_uses_the_texts_prices():
    # Part 8: a v5e costs $1.20 an hour; at 1000 tokens/s/chip that is 3.6e6 tokens for $1.20.
    assert inference.cost_per_million_tokens(V5E, tokens_per_s_per_chip=1000) == pytest.approx(1.20 / 3.6)
    assert inference.cost_per_million_tokens("h100", tokens_per_s_per_chip=1000) == pytest.approx(10.8 / 3.6)
    assert inference.cost_per_million_tokens(
        "a100", tokens_per_s_per_chip=1000, usd_per_chip_hour=3.6
    ) == pytest.approx(1.0)
    with pytest.raises(ValueError, match="chip='tpu-v4': the text quotes no price.*tpu-v5e"):
        inference.cost_per_million_tokens("v4", tokens_per_s_per_chip=1000)
    with pytest.raises(ValueError, match="tokens_per_s_per_chip=0"):
        inference.cost_per_million_tokens(V5E, tokens_per_s_per_chip=0)


@pytest.mark.parametrize(("a", "k", "expected"), [(0.0, 4, 1.0), (1.0, 4, 5.0), (0.5, 1, 1.5), (0.8, 3, 2.952)])
def test_speculative_tokens_per_step(a, k, expected):
    assert speculative.speculative_tokens_per_step(acceptance_rate=a, draft_len=k) == pytest.approx(expected)


def test_speculative_formula_matches_a_simulation():
    import random

    rng = random.Random(0)
    a, k, trials = 0.7, 5, 40_000
    total = 0
    for _ in range(trials):
        accepted = 0
        while accepted < k and rng.random() < a:
            accepted += 1
        total += accepted + 1
    assert total / trials == pytest.approx(
        speculative.speculative_tokens_per_step(acceptance_rate=a, draft_len=k), rel=0.01
    )


def test_slice_shapes_each_generation_offers():
    assert topology.slice_shapes("v5e")[:4] == ((1, 1), (2, 2), (2, 4), (4, 4))
    assert topology.slice_shapes("v5e")[-1] == (16, 16)
    assert topology.slice_shapes("v5p")[:5] == ((2, 2, 1), (2, 2, 2), (2, 2, 4), (2, 4, 4), (4, 4, 4))
    assert topology.slice_shapes("v5p")[-1] == (16, 20, 28)
    assert topology.slice_shapes("h100") == ((1,), (2,), (4,), (8,))
    for chip in ("v2", "v3", "v4", "v5e", "v5p", "v6e", "tpu-7x", "b200"):
        counts = [math.prod(s) for s in topology.slice_shapes(chip)]
        assert counts == sorted(set(counts)), chip
        for shape in topology.slice_shapes(chip):
            topology.Slice.of(chip, shape)  # every offered shape is a valid slice
    assert topology.smallest_slice("v5e", 7).shape == (2, 4)
    assert topology.smallest_slice("v5e", 17).shape == (4, 8)


def test_one_chip_of_any_generation_is_predicted_without_collectives():
    """Chapter 7 predicts a step on the reader's own device: one chip, even of a 3D-torus generation."""
    for chip in ("v5p", "v4", "v5e", "h100"):
        step = inference.decode_step_time("llama-3-8b", chip, 1, batch=8, context_len=1024)
        assert step.t_ici == 0 and step.t_weights > 0, chip
        assert inference.prefill_time("llama-3-8b", chip, 1, prompt_len=1024) > 0
    with pytest.raises(ValueError, match=r"n_chips=2: .*allowed: \[1, 4, 8"):
        inference.decode_step_time("llama-3-8b", "v5p", 2, batch=8, context_len=1024)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (
            lambda: inference.decode_step_time("llama-3-70b", V5E, 6, batch=1, context_len=8192),
            r"n_chips=6: .*allowed: \[1, 4, 8",
        ),
        (
            lambda: inference.decode_step_time("llama-3-70x", V5E, 8, batch=1, context_len=8192),
            "model='llama-3-70x'.*llama-3-70b",
        ),
        (lambda: inference.decode_step_time("llama-3-70b", "v5q", 8, batch=1, context_len=8192), "chip='v5q'"),
        (lambda: inference.decode_step_time("llama-3-70b", V5E, 8, batch=0, context_len=8192), "batch=0"),
        (
            lambda: inference.decode_step_time("llama-3-70b", V5E, 8, batch=1, context_len=8192, param_dtype="fp7"),
            "param_dtype='fp7': unknown dtype; closest: fp8",
        ),
        (
            lambda: inference.decode_step_time("llama-3-70b", V5E, 8, batch=1, context_len=8192, matmul_dtype="fp8"),
            "fp8",
        ),
        (lambda: inference.prefill_time("llama-3-70b", V5E, 8, prompt_len=1024, mfu=1.5), "mfu=1.5"),
        (lambda: inference.min_chips("llama-3.1-405b", V5E, batch=4096, context_len=131072), "batch=4096"),
        (lambda: inference.latency_throughput("llama-3-70b", V5E, 8, context_len=1024, batches=[]), r"batches=\[\]"),
        (lambda: speculative.speculative_tokens_per_step(acceptance_rate=1.2, draft_len=3), "acceptance_rate=1.2"),
        (lambda: speculative.speculative_tokens_per_step(acceptance_rate=0.5, draft_len=-1), "draft_len=-1"),
        (lambda: topology.smallest_slice("v5e", 257), "n_chips=257.*at most 256"),
    ],
)
def test_bad_input_is_named(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_serve_command_prints_the_table_and_json(capsys):
    from book_lib.__main__ import main

    argv = ["serve", "--model", "llama3-70b", "--chip", "tpu-v5e", "--chips", "8", "--context", "8192"]
    assert main([*argv, "--dtype", "int8"]) == 0
    out = capsys.readouterr().out
    assert "llama-3-70b on 8 tpu-v5e" in out and out.strip().splitlines()[-1].split()[0] == "32"  # max batch fits
    assert main([*argv, "--dtype", "int8", "--batches", "1,64", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["batch"] for r in rows] == [1, 64] and rows[0]["fits"] and not rows[1]["fits"]
    step = inference.decode_step_time(
        "llama-3-70b", V5E, 8, batch=64, context_len=8192, param_dtype="int8", kv_dtype="int8"
    )
    assert rows[1]["t_lower_s"] == pytest.approx(step.t_lower)
    assert rows[0]["usd_per_million_tokens"] == pytest.approx(
        inference.cost_per_million_tokens(V5E, tokens_per_s_per_chip=rows[0]["tokens_per_s_per_chip"])
    )


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("--chips", "6"), "n_chips=6"),
        (("--batches", "1,x"), "--batches='x': not a number"),
        (("--model", "llama3-71b"), "llama-3-70b"),
        (("--context", "1e12"), "--context=1000000000000: more tokens than llama-3-70b's 8,192 positions"),
        (("--chips", "2M"), "--chips=2097152: more chips than any system built"),
    ],
)
def test_serve_command_refuses_bad_input_in_one_line(capsys, change, message):
    from book_lib.__main__ import main

    argv = ["serve", "--model", "llama3-70b", "--chip", "tpu-v5e", "--chips", "8", "--context", "8192", *change]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


def test_serve_command_says_first_when_no_batch_fits(capsys):
    from book_lib.__main__ import main

    assert main(["serve", "--model", "llama3-70b", "--chip", "tpu-v5e", "--chips", "4", "--context", "8192"]) == 1
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("NOTHING FITS: one sequence of 8\u202f192 tokens needs a slice of 16 chips in bf16")


def test_step_time_from_sizes_gives_the_pop_quiz_and_matches_the_model_form():
    # Part 7's pop quiz: 30B int8 weights, 100 kB/token, 8192 context, v5e 4x4, bf16 FLOPs
    small = inference.decode_step_time_from_sizes(
        param_count=30e9,
        kv_bytes_per_token=100e3,
        chip="tpu-v5e",
        n_chips=16,
        batch=4,
        context_len=8192,
        param_dtype="int8",
    )
    assert small.bound == "weights"
    assert small.t_lower == pytest.approx((4 * 819.2e6 + 30e9) / (16 * 8.1e11))
    big = inference.decode_step_time_from_sizes(
        param_count=30e9,
        kv_bytes_per_token=100e3,
        chip="tpu-v5e",
        n_chips=16,
        batch=256,
        context_len=8192,
        param_dtype="int8",
    )
    # "well into the compute-bound regime for our MLP blocks", yet the caches' 16 ms are most of the 21 ms
    assert big.t_math > big.t_weights and big.bound == "kv"
    assert big.t_lower == pytest.approx(256 * 819.2e6 / (16 * 8.1e11) + 2 * 256 * 30e9 / (16 * 1.97e14))
    # the same numbers as decode_step_time on one chip, where it has no collectives
    model = get_model("llama-2-13b")
    full = inference.decode_step_time(
        model, "tpu-v5e", 1, batch=8, context_len=4096, param_dtype="int8", kv_dtype="int8"
    )
    raw = inference.decode_step_time_from_sizes(
        param_count=model.param_count(),
        kv_bytes_per_token=model.kv_cache_bytes_per_token("int8"),
        chip="tpu-v5e",
        n_chips=1,
        batch=8,
        context_len=4096,
        param_dtype="int8",
    )
    assert (raw.t_kv, raw.t_weights, raw.t_math) == pytest.approx((full.t_kv, full.t_weights, full.t_math))
    with pytest.raises(ValueError, match="kv_bytes_per_token"):
        inference.decode_step_time_from_sizes(
            param_count=30e9,
            kv_bytes_per_token=0,
            chip="tpu-v5e",
            n_chips=16,
            batch=4,
            context_len=8192,
        )


def test_prefill_servers_balance_the_two_rates():
    # the text's case: 0.91 s prefill, 19 ms steps, B = 32, 512 tokens -> about 3 prefill servers each
    ratio = serving.prefill_servers_per_generate_server(
        prefill_s=0.91, decode_step_s=0.019, decode_batch=32, decode_len=512
    )
    assert ratio == pytest.approx(2.99, abs=0.01)
    # the rates balance: prompts in per second equals sequences out per second
    assert ratio / 0.91 == pytest.approx(32 / (0.019 * 512))
    assert serving.prefill_servers_per_generate_server(
        prefill_s=1.0, decode_step_s=0.01, decode_batch=64, decode_len=100
    ) == pytest.approx(64.0)
    with pytest.raises(ValueError, match="decode_len"):
        serving.prefill_servers_per_generate_server(prefill_s=0.91, decode_step_s=0.019, decode_batch=32, decode_len=0)


def test_memory_bound_model_parallelism_balances_ici_against_weight_loads():
    v5e = get_chip("tpu-v5e")
    y = inference.memory_bound_model_parallelism(v5e, d_ff=28_672, batch=64)
    w_ici = max(topology.pod(v5e).axis_bytes_per_s)
    # at that Y the two times of one [64, 8192] x [8192, 28672] bf16 matmul are equal
    t_ici = 2 * 64 * 8192 / w_ici
    t_hbm = 2 * 8192 * 28_672 / (y * v5e.hbm_bytes_per_s)
    assert t_ici == pytest.approx(t_hbm)
    assert 40 < y < 60  # the text's 56 uses beta = 8; v5e's is 9
    assert inference.memory_bound_model_parallelism(v5e, d_ff=28_672, batch=32) == pytest.approx(2 * y)
    assert inference.memory_bound_model_parallelism(v5e, d_ff=28_672, batch=64, param_dtype="int8") == pytest.approx(
        y / 2
    )
    with pytest.raises(ValueError, match="batch"):
        inference.memory_bound_model_parallelism(v5e, d_ff=28_672, batch=0)


# gpt-fast's Mixtral 8x7B decode at batch 1 on 8 A100-80GB (power-limited to 330 W), tokens/s:
# https://github.com/pytorch-labs/gpt-fast/blob/main/mixtral-moe/README.md ("Benchmarks").
GPT_FAST_MIXTRAL = {("bf16", 2): 96.67, ("bf16", 4): 155.35, ("bf16", 8): 227.82,
                    ("int8", 1): 97.92, ("int8", 2): 155.03, ("int8", 4): 216.87, ("int8", 8): 279.35}  # fmt: skip


@pytest.mark.parametrize(("dtype", "gpus"), sorted(GPT_FAST_MIXTRAL))
def test_mixtral_decode_bound_is_never_slower_than_gpt_fast_measured(dtype, gpus):
    # Before an MoE step read only the experts its batch touches, this bound was 0.45-0.56 of the measured rate.
    step = inference.decode_step_time("mixtral-8x7b", "a100", gpus, batch=1, context_len=16, param_dtype=dtype)
    assert step.tokens_per_s >= GPT_FAST_MIXTRAL[dtype, gpus]


def test_a_request_mix_adds_prefill_to_the_decode_steps():
    kw = {"batch": 16, "prompt_len": 2048, "output_len": 512, "param_dtype": "int8", "kv_dtype": "int8"}
    mix = serving.request_mix("llama-3-70b", V5E, 16, **kw)
    # The steps' cache reads grow linearly, so the mean context gives their sum exactly.
    at = {c: inference.decode_step_time("llama-3-70b", V5E, 16, batch=16, context_len=c, param_dtype="int8",
                                        kv_dtype="int8").t_lower for c in (2048, 2048 + 256, 2048 + 512)}  # fmt: skip
    assert mix.step.t_lower == pytest.approx(at[2048 + 256]) and at[2048] < mix.step.t_lower < at[2560]
    assert mix.prefill_s == pytest.approx(inference.prefill_time("llama-3-70b", V5E, 16, prompt_len=2048))
    assert mix.latency_s == pytest.approx(mix.prefill_s + 512 * mix.step.t_lower)
    assert mix.requests_per_s == pytest.approx(16 / (16 * mix.prefill_s + 512 * mix.step.t_lower))


def test_serve_answers_for_a_request_mix_and_refuses_half_of_one(capsys):
    from book_lib.__main__ import main

    argv = ["serve", "--model", "llama3-70b", "--chip", "tpu-v5e", "--chips", "16", "--context", "4096"]
    assert main([*argv, "--dtype", "int8", "--prompt", "2K", "--output", "512", "--batches", "16", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    mix = serving.request_mix(
        "llama-3-70b", V5E, 16, batch=16, prompt_len=2048, output_len=512, param_dtype="int8", kv_dtype="int8"
    )
    assert row["request_latency_s"] == pytest.approx(mix.latency_s) and row["requests_per_s"] == pytest.approx(
        mix.requests_per_s
    )
    assert main([*argv, "--prompt", "2048"]) == 2
    assert capsys.readouterr().err.startswith("error: --output=None: a request mix needs both")
    assert main([*argv, "--prompt", "4096", "--output", "1"]) == 2
    assert "allowed: a --context of at least 4097" in capsys.readouterr().err


def test_prefill_has_an_expected_time_no_faster_than_its_bound_and_at_the_achieved_rates():
    step = inference.prefill_step("llama-3-70b", "h100", 8, prompt_len=8192)
    assert step.expected_s > step.roofline_s > 0
    terms = {t.name: t.seconds for t in step.terms}
    # the weight matmuls at the sustained 70.6 % of the H100's peak (MSMF), attention at FlashAttention-3's 60.9 %
    assert terms["matmul FLOPs at peak"] + terms["matmuls at the achieved rate"] == pytest.approx(
        step.t_matmul * 989 / 698.6
    )
    assert terms["attention at the flash-attention rate"] == pytest.approx(step.t_attention * 989 / 602)
    # a TPU runs at its peak until measured, and fuses its kernels
    tpu = inference.prefill_step("llama-3-70b", "tpu-v5e", 8, prompt_len=8192)
    assert {t.name: t.seconds for t in tpu.terms}["kernel fixed cost"] == 0
    with pytest.raises(ValueError, match=r"^prompt_len=200000: more tokens than llama-3-70b's"):
        inference.prefill_step("llama-3-70b", "h100", 8, prompt_len=200_000)


def test_a_decode_step_pays_a_fixed_cost_per_kernel_that_more_gpus_do_not_shrink():
    one, eight = (inference.decode_step_time("llama-2-7b", "a100", n, batch=1, context_len=5) for n in (1, 8))
    assert one.t_kernels == eight.t_kernels == pytest.approx(32 * 11 * 70e-6 / 80)
    assert eight.t_kernels / eight.expected_s > 3 * one.t_kernels / one.expected_s
    # gpt-fast's int4 "G=32": a bf16 scale and zero point per 32 weights, 0.625 bytes a weight in all
    plain = inference.decode_step_time("llama-2-7b", "a100", 1, batch=1, context_len=5, param_dtype="int4")
    grouped = inference.decode_step_time("llama-2-7b", "a100", 1, batch=1, context_len=5, param_dtype="int4",
                                         weight_group_size=32)  # fmt: skip
    assert grouped.t_weights == pytest.approx(plain.t_weights * 0.625 / 0.5)
