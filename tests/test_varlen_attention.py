"""Padding-free batches on core torch's varlen kernel (`torch_varlen`), and padded batches that need no device check.

A CPU has no varlen kernel, so the packed path is checked two ways: through the block-diagonal SDPA fallback the
model takes there (outputs and gradients against padding, every position kind), and through the kernel's plumbing
with `varlen_attention.varlen_kernel` replaced by a per-sequence SDPA reference (the offsets the collator computed
reach it unchanged). Neither path reads a tensor on the host, and the packed forward is one graph.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import pytest
import torch
from transformers import AttentionInterface
from conftest import tiny_config
from test_host_syncs import OpRecorder

from hf_spt import SptForMaskedLM, SptForSequenceClassification
from hf_spt.errors import UserInputError
from hf_spt.models import attention_spt, varlen_attention
from hf_spt.models.attention_spt import attention_bias, key_padding_mask
from hf_spt.models.tokenization_spt import build_word_tokenizer
from hf_spt.training.collators import DataCollatorForClassification, DataCollatorForSpt
from hf_spt.training.padding_free import check_padding_free, padding_free_path

LENGTHS = [5, 12, 3, 9]
POSITION_KINDS = ["sinusoidal", "learned", "rotary", "alibi", "none"]
HOST_READS = {"aten.nonzero", "aten.index[bool]", "aten.masked_select", "aten._local_scalar_dense"}


def tokenizer():
    return build_word_tokenizer([f"s{i}" for i in range(95)])


def features(seed: int = 0, pairs: bool = False) -> list[dict]:
    generator = torch.Generator().manual_seed(seed)
    rows = [torch.randint(4, 99, (n,), generator=generator).tolist() for n in LENGTHS]
    others = [torch.randint(4, 99, (n,), generator=generator).tolist() for n in LENGTHS[::-1]]
    return [{"input_ids": row, "labels": i % 3, **({"pair_input_ids": other} if pairs else {})}
            for i, (row, other) in enumerate(zip(rows, others))]


def varlen_model(model_class, **config):
    torch.manual_seed(0)
    model = model_class(tiny_config(**config))
    model.set_attn_implementation("torch_varlen")
    return model


def unpadded(padded_output: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """(B, T, ...) -> (N, ...): each row's real tokens, end to end, as a packed row lays them."""
    return padded_output[mask.bool()]


def reference_kernel(calls: list, half_precision: bool = False):
    """`varlen_attention.reference_varlen_kernel` standing in for `varlen_attn` (N, H, hd), checking the kernel's
    contract (in float32 too unless `half_precision`), recording the offsets it was given."""

    def kernel(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale):
        calls.append((cu_seq_q, cu_seq_k, max_q, max_k))
        return varlen_attention.reference_varlen_kernel(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, scale,
                                                        half_precision=half_precision)

    return kernel


@pytest.fixture
def kernel_on_cpu(monkeypatch):
    """The varlen kernel's path on a CPU: the model decides it runs, and the reference stands in for it."""
    calls = []
    monkeypatch.setattr(varlen_attention, "varlen_kernel", reference_kernel(calls))
    monkeypatch.setattr("hf_spt.models.modeling_spt.varlen_kernel_runs", lambda *args: True)
    return calls


def mlm_batches(position_kind: str) -> tuple[dict, dict]:
    rows = [{"input_ids": row["input_ids"]} for row in features()]
    labels = [[-100 if j % 3 else token for j, token in enumerate(row["input_ids"])] for row in rows]
    given = [{**row, "labels": label} for row, label in zip(rows, labels)]  # masked beforehand: the same targets
    return DataCollatorForSpt(tokenizer())(given), DataCollatorForSpt(tokenizer(), padding_free=True)(given)


def check_packed_equals_padded(model, padded: dict, packed: dict, mask: torch.Tensor) -> None:
    """Logits, loss and every gradient of the packed batch equal the padded batch's."""
    outputs = {}
    for name, batch in (("padded", padded), ("packed", packed)):
        model.zero_grad()
        output = model(**batch)
        output.loss.backward()
        outputs[name] = (output, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    (pad, pad_grads), (pack, pack_grads) = outputs["padded"], outputs["packed"]
    expected = unpadded(pad.logits, mask) if pad.logits.dim() == 3 else pad.logits
    got = pack.logits[0] if pack.logits.dim() == 3 else pack.logits
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(pack.loss, pad.loss, atol=2e-5, rtol=1e-4)
    assert pad_grads.keys() == pack_grads.keys() and len(pad_grads) > 5
    for name in pad_grads:
        torch.testing.assert_close(pack_grads[name], pad_grads[name], atol=5e-5, rtol=1e-3, msg=name)


@pytest.mark.parametrize("position_kind", POSITION_KINDS)
def test_packed_mlm_through_the_fallback_equals_padding(position_kind):
    model = varlen_model(SptForMaskedLM, position_embedding_type=position_kind)
    padded, packed = mlm_batches(position_kind)
    check_packed_equals_padded(model, padded, packed, padded["attention_mask"])


@pytest.mark.parametrize("position_kind", [kind for kind in POSITION_KINDS if kind != "alibi"])
def test_packed_mlm_through_the_kernel_plumbing_equals_padding(position_kind, kernel_on_cpu):
    model = varlen_model(SptForMaskedLM, position_embedding_type=position_kind)
    padded, packed = mlm_batches(position_kind)
    check_packed_equals_padded(model, padded, packed, padded["attention_mask"])
    cu_q, cu_k, max_q, max_k = kernel_on_cpu[-1]
    assert len(kernel_on_cpu) == 2  # once per layer, in the packed forward only
    assert cu_q is packed["cu_seq_lens_q"] and cu_k is cu_q and (max_q, max_k) == (12, 12)
    assert "cu_seq_lens_k" not in packed  # one tensor, copied to the device once


@pytest.mark.parametrize("two_tower", [False, True])
@pytest.mark.parametrize("pooling", ["mean", "max", "last", "cls", "last_mean"])
def test_packed_classification_equals_padding_on_both_paths(two_tower, pooling, monkeypatch):
    batch = features(pairs=two_tower)
    padded = DataCollatorForClassification(tokenizer())(batch)
    packed = DataCollatorForClassification(tokenizer(), padding_free=True)(batch)
    assert "pair_cu_seq_lens_q" in packed if two_tower else "pair_input_ids" not in packed
    model = varlen_model(SptForSequenceClassification, two_tower=two_tower, pooling=pooling)
    check_packed_equals_padded(model, padded, packed, padded["attention_mask"])
    monkeypatch.setattr(varlen_attention, "varlen_kernel", reference_kernel([]))
    monkeypatch.setattr("hf_spt.models.modeling_spt.varlen_kernel_runs", lambda *args: True)
    check_packed_equals_padded(model, padded, packed, padded["attention_mask"])


@pytest.mark.parametrize("on_kernel", [False, True])
def test_the_packed_path_reads_nothing_on_the_host(on_kernel, monkeypatch):
    if on_kernel:
        monkeypatch.setattr(varlen_attention, "varlen_kernel", reference_kernel([]))
        monkeypatch.setattr("hf_spt.models.modeling_spt.varlen_kernel_runs", lambda *args: True)
    collator = DataCollatorForSpt(tokenizer(), mlm_probability=0.5, padding_free=True, return_masked_positions=True)
    torch.manual_seed(0)
    batch = collator([{"input_ids": row["input_ids"]} for row in features()])
    model = varlen_model(SptForMaskedLM, sparse_prediction=True)
    classifier = varlen_model(SptForSequenceClassification, pooling="last_mean")
    packed = DataCollatorForClassification(tokenizer(), padding_free=True)(features())
    without_ids = DataCollatorForClassification(tokenizer(), padding_free=True, return_seq_idx=False)(features())
    with OpRecorder() as recorder:
        model(**batch).loss.backward()
        classifier(**packed).loss.backward()
        classifier(**without_ids).loss.backward()  # pooling derives the sequence ids on the device
    assert not HOST_READS & recorder.ops, HOST_READS & recorder.ops


def test_the_packed_forward_is_one_graph_with_the_token_dimension_dynamic():
    import torch._dynamo

    collator = DataCollatorForSpt(tokenizer(), mlm_probability=0.5, padding_free=True, return_masked_positions=True)
    torch.manual_seed(0)
    batch = collator([{"input_ids": row["input_ids"]} for row in features()])
    for name in ("input_ids", "position_ids", "seq_idx", "labels"):
        torch._dynamo.mark_dynamic(batch[name], 1)
    torch._dynamo.mark_dynamic(batch["masked_positions"], 0)
    model = varlen_model(SptForMaskedLM, sparse_prediction=True)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(model)(**batch)
    torch._dynamo.reset()
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons


def test_the_path_is_named_where_the_kernel_cannot_run():
    config = tiny_config()
    assert varlen_attention.varlen_path("cpu", torch.float32, config, training=True) == (
        "block-diagonal SDPA (cpu, not CUDA; float32: the kernel takes float16/bfloat16 (--bf16))")
    expected = "varlen kernel" if varlen_attention.kernel_available() else "block-diagonal SDPA"
    assert varlen_attention.varlen_path("cuda", torch.bfloat16, config, training=True).startswith(expected)
    assert "ALiBi" in varlen_attention.varlen_path("cuda", torch.bfloat16, tiny_config(position_embedding_type="alibi"),
                                                   training=False)
    dropout = tiny_config(attention_probs_dropout_prob=0.1)
    assert "dropout" in varlen_attention.varlen_path("cuda", torch.bfloat16, dropout, training=True)
    assert "dropout" not in varlen_attention.varlen_path("cuda", torch.bfloat16, dropout, training=False)


def test_a_padded_batch_on_an_accelerator_gets_its_key_mask_without_a_device_check():
    """On an accelerator the mask reaches SDPA as (B, 1, 1, T): built without reading the mask (here on the meta
    device, which has no data to read), and SDPA computes with it what transformers' (B, 1, T, T) mask gives."""
    config = tiny_config()
    config._attn_implementation = "sdpa"  # as a model built from it has
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    with OpRecorder() as recorder:
        bias = attention_bias(config, mask.to("meta"), torch.empty(2, 4, 32, device="meta"), None)
    assert bias.shape == (2, 1, 1, 4) and bias.dtype == torch.bool and not HOST_READS & recorder.ops
    cpu_mask = attention_bias(config, mask, torch.zeros(2, 4, 32), None)  # transformers' own, on the CPU
    assert cpu_mask.shape == (2, 1, 4, 4)
    query, key, value = torch.randn(3, 2, 4, 4, 8).unbind(0)
    sdpa = torch.nn.functional.scaled_dot_product_attention
    torch.testing.assert_close(sdpa(query, key, value, attn_mask=key_padding_mask(mask)),
                               sdpa(query, key, value, attn_mask=cpu_mask))


def one_collation(device: str) -> tuple[dict, dict]:
    """A padded and a packed batch of the same rows with the same masked tokens: ONE masking draw (the padded
    collation), whose rows are then packed as given (labels set: padded only, nothing drawn again). The packed batch
    carries no `seq_idx`, as the trainers give it where the kernel runs."""
    rows = [{"input_ids": row["input_ids"]} for row in features()]
    torch.manual_seed(0)
    padded = DataCollatorForSpt(tokenizer(), mlm_probability=0.5, return_masked_positions=True,
                                omit_full_attention_mask=device != "cpu")(rows)
    mask = padded.get("attention_mask", torch.ones_like(padded["input_ids"])).bool()
    masked_rows = [{"input_ids": ids[keep].tolist(), "labels": labels[keep].tolist()}
                   for ids, labels, keep in zip(padded["input_ids"], padded["labels"], mask)]
    packed = DataCollatorForSpt(tokenizer(), padding_free=True, return_masked_positions=True,
                                return_seq_idx=False)(masked_rows)
    move = lambda batch: {key: value.to(device) if torch.is_tensor(value) else value for key, value in batch.items()}
    return move(padded), move(packed)


def packed_and_padded_logits(model, padded: dict, packed: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """The packed batch's logits (N, V) and the padded batch's at its real tokens, in eval mode, in float32."""
    model.eval()
    with torch.no_grad():
        plain = {key: value for key, value in packed.items() if key not in ("labels", "masked_positions")}
        got = model(**plain).logits[0].float()
        expected = model(input_ids=padded["input_ids"], attention_mask=padded["attention_mask"]).logits.float()
    return got, unpadded(expected, padded["attention_mask"])


def test_one_collation_gives_both_layouts_the_same_tokens_and_the_cpu_logits_agree():
    """The GPU test's batches and comparison, run on the CPU through the block-diagonal path (float32): the packed
    row holds exactly the padded batch's real tokens and targets, and its logits are the padded batch's."""
    padded, packed = one_collation("cpu")
    mask = padded["attention_mask"].bool()
    assert torch.equal(packed["input_ids"][0], padded["input_ids"][mask])
    assert torch.equal(packed["labels"][0], padded["labels"][mask])
    assert "seq_idx" not in packed and "cu_seq_lens_k" not in packed
    model = varlen_model(SptForMaskedLM, sparse_prediction=True)
    got, expected = packed_and_padded_logits(model, padded, packed)
    torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-4)


@pytest.fixture
def stand_in_back_end():
    """Registers a kernel under `REFERENCE_VARLEN` through transformers' `AttentionInterface` (the seam
    `benchmarks/timed_run.py` uses), and the real stand-in back again after the test."""
    yield lambda kernel: AttentionInterface.register(varlen_attention.REFERENCE_VARLEN,
                                                     functools.partial(varlen_attention.packed_attention, kernel))
    AttentionInterface.register(varlen_attention.REFERENCE_VARLEN, varlen_attention.reference_varlen_attention_forward)


@pytest.mark.parametrize("position_kind", [kind for kind in POSITION_KINDS if kind != "alibi"])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_under_autocast_query_key_and_value_reach_the_kernel_in_one_half_precision_dtype(position_kind, dtype,
                                                                                          stand_in_back_end):
    """A GPU's autocast, on the CPU, through the stand-in back-end (`REFERENCE_VARLEN`, nothing patched): packed rows
    take the kernel's path, attention keeps autocast's dtype (not the CPU's float32) and the stand-in kernel checks
    the real kernel's contract on every call; rotary's float32 cos/sin must not leave q and k in float32."""
    calls = []
    stand_in_back_end(reference_kernel(calls, half_precision=True))
    model = varlen_model(SptForMaskedLM, position_embedding_type=position_kind, sparse_prediction=True,
                         hidden_size=32, num_attention_heads=4)  # heads of 8 channels
    model.set_attn_implementation(varlen_attention.REFERENCE_VARLEN)
    padded, packed = one_collation("cpu")
    with torch.autocast("cpu", dtype=dtype):
        loss = model(**packed).loss
    loss.backward()
    assert len(calls) == 2 and torch.isfinite(loss)
    arguments = SimpleNamespace(device=torch.device("cpu"), bf16=dtype == torch.bfloat16, fp16=dtype == torch.float16)
    assert padding_free_path(model, arguments) == "varlen kernel (a stand-in: reference_varlen_kernel)"


def test_the_kernel_forward_casts_rotary_float32_queries_to_autocast_dtype(monkeypatch):
    seen = []
    monkeypatch.setattr(varlen_attention, "varlen_kernel",
                        lambda q, k, v, *rest: seen.append((q.dtype, k.dtype, v.dtype)) or v.clone())
    query, key = torch.randn(2, 1, 4, 6, 8).unbind(0)  # (1, H, N, hd), float32 as rotary leaves them
    value = torch.randn(1, 4, 6, 8, dtype=torch.bfloat16)
    offsets = torch.tensor([0, 2, 6], dtype=torch.int32)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        varlen_attention.torch_varlen_attention_forward(None, query, key, value, None, cu_seq_lens_q=offsets,
                                                        max_length_q=4)
    assert seen == [(torch.bfloat16,) * 3]


def test_the_stand_in_kernel_refuses_what_the_real_kernel_cannot_take():
    query = torch.randn(6, 2, 8, dtype=torch.bfloat16)
    offsets = torch.tensor([0, 2, 6], dtype=torch.int32)
    kernel = functools.partial(varlen_attention.reference_varlen_kernel, scale=0.3)
    assert kernel(query, query, query, offsets, offsets, 4, 4).shape == (6, 2, 8)
    broken = {
        "float32": dict(value=query.float()),
        "not contiguous": dict(query=torch.randn(2, 6, 8, dtype=torch.bfloat16).transpose(0, 1)),
        "int32": dict(cu_seq_q=offsets.long()),
        "host int": dict(max_q=torch.tensor(4)),
        "rise from 0": dict(cu_seq_q=torch.tensor([1, 2, 6], dtype=torch.int32)),
        "longest sequence is 4": dict(max_k=5),
        "head size 12": dict(query=torch.randn(6, 2, 12, dtype=torch.bfloat16)),
    }
    for message, change in broken.items():
        arguments = dict(query=query, key=query, value=query, cu_seq_q=offsets, cu_seq_k=offsets, max_q=4, max_k=4)
        arguments.update(change)
        if "query" in change:
            arguments["key"] = arguments["value"] = change["query"].contiguous()
        with pytest.raises(ValueError, match=message):
            kernel(**arguments)


def test_the_kernel_path_needs_a_scale_argument_and_a_head_size_it_takes(monkeypatch):
    import torch.nn.attention.varlen as varlen_module

    def old_varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, return_aux=None):  # torch 2.10's
        raise AssertionError("not called")

    monkeypatch.setattr(varlen_module, "varlen_attn", old_varlen_attn)
    path = varlen_attention.varlen_path("cuda", torch.bfloat16, tiny_config(), training=True)
    assert path.startswith("block-diagonal SDPA") and "takes no scale= argument" in path
    monkeypatch.undo()
    odd_heads = tiny_config(hidden_size=36, num_attention_heads=3)
    assert "head size 12: the kernel takes a multiple of 8" in varlen_attention.varlen_path(
        "cuda", torch.bfloat16, odd_heads, training=True)


@pytest.mark.parametrize("settings", [dict(bf16=False), dict(bf16=True, position_embedding_type="alibi"),
                                      dict(bf16=True, attention_probs_dropout_prob=0.1)])
def test_on_an_accelerator_padding_free_refuses_the_dense_fallback(settings, monkeypatch):
    """float32, ALiBi or attention dropout on a GPU would pack into one dense N x N mask: refused with one line
    naming the fix; the CPU keeps its fallback (tests/test_packing_and_grouping.py)."""
    monkeypatch.setattr(varlen_attention, "kernel_unavailable", lambda: None, raising=False)  # a CUDA torch's
    bf16 = settings.pop("bf16")
    model = SptForMaskedLM(tiny_config(**settings))
    args = SimpleNamespace(device=torch.device("cuda"), bf16=bf16, fp16=False)
    with pytest.raises(UserInputError, match="block-diagonal SDPA") as error:
        check_padding_free(model, args)
    message = str(error.value)
    assert "\n" not in message and "--bf16" in message and "leave out --padding_free" in message
    assert check_padding_free(SptForMaskedLM(tiny_config()), SimpleNamespace(
        device=torch.device("cuda"), bf16=True, fp16=False)) == "varlen kernel"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a GPU test (benchmarks/gpu_self_check.py runs it)")
def test_on_a_gpu_the_varlen_kernel_gives_the_padded_logits_without_a_sync():
    """bf16 autocast on CUDA: the packed batch runs torch's varlen kernel (the path says so), its logits match the
    padded batch's (the same collation: the same tokens and targets) to bf16 precision, and its training step raises
    nothing in CUDA's sync debug mode; a padded batch's step (its key mask, no device check) neither."""
    model = varlen_model(SptForMaskedLM, sparse_prediction=True).to("cuda")
    padded, packed = one_collation("cuda")
    assert varlen_attention.varlen_path("cuda", torch.bfloat16, model.config, training=True) == "varlen kernel"
    with torch.autocast("cuda", dtype=torch.bfloat16):
        got, expected = packed_and_padded_logits(model, padded, packed)
    torch.testing.assert_close(got, expected, atol=5e-2, rtol=5e-2)
    model.train()
    torch.cuda.synchronize()
    try:
        torch.cuda.set_sync_debug_mode("error")
        for batch in (packed, padded):
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = model(**batch).loss
            loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
