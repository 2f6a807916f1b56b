"""No per-step host sync that hf_spt adds on an accelerator. SPT's masked-token gather: the collator finds the
masked rows' flat indices on the host (`masked_positions`), `SptForMaskedLM` selects them with `index_select`, and a
training run gives the same weights, bit for bit, as selecting them with `labels != -100` on the device. Unpadded
batches: the trainers' collators leave out an all-ones attention mask on an accelerator, which transformers would
check on the device (a sync) only to drop it."""

from __future__ import annotations

import pytest
import torch
from datasets import Dataset
from torch.utils._python_dispatch import TorchDispatchMode

from hf_spt import SptConfig, SptForMaskedLM, SptForSequenceClassification
from hf_spt.models.tokenization_spt import build_word_tokenizer
from hf_spt.training.arguments import PretrainArguments
from hf_spt.training.arguments import FinetuneArguments
from hf_spt.training.collators import DataCollatorForClassification, DataCollatorForSpt, masked_positions
from hf_spt.training.finetune_trainer import FinetuneTrainer
from hf_spt.training.pretrain_trainer import PretrainTrainer, reaches_model_whole

ROWS = [[5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [5, 6, 7, 8, 9], [9, 8, 7, 6, 5, 4, 5, 6]]


def tiny_config(**kwargs) -> SptConfig:
    return SptConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64, **kwargs)


def tokenizer():
    return build_word_tokenizer([f"s{i}" for i in range(36)])


class OpRecorder(TorchDispatchMode):
    """The aten operators run inside the block (`aten.index[bool]`: indexing with a boolean mask, whose result size
    only the device knows; `aten._local_scalar_dense`: a tensor read on the host, `.item()` or a Python `if`)."""

    def __init__(self):
        super().__init__()
        self.ops = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        indices = args[1] if name == "aten.index" and len(args) > 1 else ()
        boolean = any(isinstance(index, torch.Tensor) and index.dtype == torch.bool for index in indices)
        self.ops.add(f"{name}[bool]" if boolean else name)
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("options", [{}, {"pad_to_multiple_of": 8}, {"padding_free": True}])
def test_the_collator_indexes_exactly_the_labelled_tokens(options):
    collator = DataCollatorForSpt(tokenizer(), mlm_probability=0.5, return_masked_positions=True, **options)
    torch.manual_seed(0)
    batch = collator([{"input_ids": row} for row in ROWS])
    flat = batch["labels"].reshape(-1)
    assert torch.equal(batch["masked_positions"], torch.arange(flat.numel())[flat != -100])
    assert batch["masked_positions"].numel() > 0


def test_rows_masked_beforehand_get_their_positions_too():
    labels = [[-100, 7, -100], [8, -100, 9]]
    collator = DataCollatorForSpt(tokenizer(), return_masked_positions=True)
    batch = collator([{"input_ids": [5, 6, 7], "labels": labels[0]}, {"input_ids": [5, 6, 7], "labels": labels[1]}])
    assert batch["masked_positions"].tolist() == [1, 3, 5]
    assert "masked_positions" not in DataCollatorForSpt(tokenizer())([{"input_ids": [5, 6, 7]}])


def test_masked_positions_are_row_major_flat_indices():
    labels = torch.tensor([[-100, 3, 4], [5, -100, -100]])
    assert masked_positions(labels).tolist() == [1, 2, 3]
    assert masked_positions(torch.full((2, 3), -100)).numel() == 0


def test_the_model_selects_the_same_rows_without_a_data_dependent_operator():
    torch.manual_seed(0)
    model = SptForMaskedLM(tiny_config(sparse_prediction=True)).eval()
    batch = DataCollatorForSpt(tokenizer(), mlm_probability=0.5, return_masked_positions=True)(
        [{"input_ids": row} for row in ROWS])
    positions = batch.pop("masked_positions")
    batch.pop("attention_mask")  # a padding mask costs transformers' own check (BERT's too); this test is the gather's
    with OpRecorder() as by_mask:
        expected = model(**batch)
    with OpRecorder() as by_positions:
        given = model(**batch, masked_positions=positions)
    assert torch.equal(given.logits, expected.logits) and torch.equal(given.loss, expected.loss)
    data_dependent = {"aten.nonzero", "aten.index[bool]", "aten.masked_select", "aten._local_scalar_dense"}
    assert "aten.index[bool]" in by_mask.ops  # canary: the recorder sees what boolean selection runs
    assert not data_dependent & by_positions.ops and "aten.index_select" in by_positions.ops


def test_the_sparse_training_forward_compiles_to_one_graph():
    """`torch.compile` breaks the graph at a boolean selection (its size is data-dependent), which split SPT's
    training forward in three graphs; on `masked_positions` it is one (dynamo's `explain`, no inductor)."""
    import torch._dynamo

    torch.manual_seed(0)
    model = SptForMaskedLM(tiny_config(sparse_prediction=True))
    batch = DataCollatorForSpt(tokenizer(), mlm_probability=0.5, return_masked_positions=True)(
        [{"input_ids": row} for row in ROWS])
    positions = batch.pop("masked_positions")
    graphs = {}
    for name, given in (("mask", None), ("positions", positions)):
        torch._dynamo.reset()
        graphs[name] = torch._dynamo.explain(model)(**batch, masked_positions=given).graph_count
    torch._dynamo.reset()
    assert graphs == {"mask": 3, "positions": 1}


def test_positions_are_read_only_with_sparse_prediction():
    torch.manual_seed(0)
    model = SptForMaskedLM(tiny_config()).eval()
    batch = DataCollatorForSpt(tokenizer(), mlm_probability=0.5, return_masked_positions=True)(
        [{"input_ids": row} for row in ROWS])
    positions = batch.pop("masked_positions")
    assert model(**batch, masked_positions=positions).logits.shape == (*batch["input_ids"].shape, 40)


def _trained_weights(tmp_path, collator_positions: bool | None, **options) -> dict[str, torch.Tensor]:
    data = Dataset.from_dict({"input_ids": ROWS * 4})
    args = PretrainArguments(output_dir=str(tmp_path), per_device_train_batch_size=3, max_steps=4, report_to=[],
                             use_cpu=True, eval_strategy="no", save_strategy="no", load_best_model_at_end=False,
                             mlm_probability=0.5, seed=3, logging_strategy="no", **options)
    torch.manual_seed(0)
    model = SptForMaskedLM(tiny_config())
    collator = None
    if collator_positions is not None:
        collator = DataCollatorForSpt(tokenizer(), mlm_probability=0.5, return_masked_positions=collator_positions)
    trainer = PretrainTrainer(model, args, data, processing_class=tokenizer(), data_collator=collator)
    assert trainer.data_collator.return_masked_positions is (collator_positions is not False)
    trainer.train()
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


@pytest.mark.parametrize("options", [{}, {"token_weighting": "inverse_frequency"}])
def test_training_on_positions_gives_the_same_weights_bit_for_bit(tmp_path, options):
    with_positions = _trained_weights(tmp_path / "a", None, **options)  # the trainer's own collator
    with_mask = _trained_weights(tmp_path / "b", False, **options)
    assert all(torch.equal(with_positions[name], with_mask[name]) for name in with_mask)


def test_batches_split_after_collation_get_no_positions(tmp_path):
    def arguments(**accelerator_config) -> PretrainArguments:
        return PretrainArguments(output_dir=str(tmp_path), use_cpu=True, report_to=[],
                                 accelerator_config=accelerator_config or None)

    assert reaches_model_whole(arguments())
    assert not reaches_model_whole(arguments(split_batches=True))
    assert not reaches_model_whole(arguments(dispatch_batches=True))


def test_collators_leave_out_the_attention_mask_of_unpadded_batches_only_when_asked():
    equal, unequal = [{"input_ids": [5, 6, 7]}] * 2, [{"input_ids": [5, 6, 7]}, {"input_ids": [5, 6]}]
    for collator in (DataCollatorForSpt(tokenizer(), omit_full_attention_mask=True),
                     DataCollatorForClassification(tokenizer(), omit_full_attention_mask=True)):
        assert "attention_mask" not in collator(equal) and "attention_mask" in collator(unequal)
    for collator in (DataCollatorForSpt(tokenizer()), DataCollatorForClassification(tokenizer())):
        assert "attention_mask" in collator(equal)  # the default: transformers' collators always give one
    pairs = [{"input_ids": [5, 6], "pair_input_ids": [7, 8, 9]}, {"input_ids": [5, 6], "pair_input_ids": [7]}]
    batch = DataCollatorForClassification(tokenizer(), omit_full_attention_mask=True)(pairs)
    assert "attention_mask" not in batch and "pair_attention_mask" in batch  # each column on its own


@pytest.mark.parametrize("model_class", [SptForMaskedLM, SptForSequenceClassification])
def test_an_unpadded_batch_without_its_mask_computes_the_same_without_a_host_read(model_class):
    torch.manual_seed(0)
    model = model_class(tiny_config(num_labels=3, pooling="mean")).eval()
    input_ids = torch.randint(4, 40, (3, 12))
    with OpRecorder() as with_mask:
        expected = model(input_ids=input_ids, attention_mask=torch.ones_like(input_ids)).logits
    with OpRecorder() as without:
        given = model(input_ids=input_ids).logits
    assert torch.allclose(given, expected, atol=1e-6)
    assert "aten._local_scalar_dense" in with_mask.ops  # canary: transformers reads the all-ones mask on the host
    assert "aten._local_scalar_dense" not in without.ops


def trainers_omit_full_masks(tmp_path, **device) -> tuple[bool, bool]:
    """Whether `PretrainTrainer`'s and `FinetuneTrainer`'s own collators leave out all-ones masks."""
    data = Dataset.from_dict({"input_ids": ROWS, "labels": [0, 1, 0]})
    common = dict(output_dir=str(tmp_path), report_to=[], eval_strategy="no", save_strategy="no",
                  load_best_model_at_end=False, **device)
    pretrain = PretrainTrainer(SptForMaskedLM(tiny_config()), PretrainArguments(**common), data,
                               processing_class=tokenizer())
    finetune = FinetuneTrainer(SptForSequenceClassification(tiny_config(num_labels=2)), FinetuneArguments(**common),
                               data, processing_class=tokenizer())
    return pretrain.data_collator.omit_full_attention_mask, finetune.data_collator.omit_full_attention_mask


@pytest.mark.parametrize("arguments_class", [PretrainArguments, FinetuneArguments])
def test_the_trainers_used_as_a_library_check_no_loss_for_nan_every_step(arguments_class, tmp_path):
    """transformers' `logging_nan_inf_filter=True` reads every micro-step's loss on the host (a GPU sync per step);
    both phases' arguments default it off, as a run_spt.py run has it."""
    assert arguments_class(output_dir=str(tmp_path), report_to=[]).logging_nan_inf_filter is False


def test_on_a_cpu_the_trainers_keep_every_mask(tmp_path):
    """CPU runs compute exactly as before: the mask of an unpadded batch stays (its pooling sums in another order)."""
    assert trainers_omit_full_masks(tmp_path, use_cpu=True) == (False, False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a GPU test (benchmarks/gpu_self_check.py runs it)")
def test_on_a_gpu_the_trainers_leave_out_full_masks(tmp_path):
    assert trainers_omit_full_masks(tmp_path) == (True, True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="a GPU test (benchmarks/gpu_self_check.py runs it)")
def test_on_a_gpu_a_training_step_on_an_unpadded_batch_runs_without_a_sync():
    """CUDA's sync debug mode raises on a synchronising call: the sparse forward and backward on an unpadded batch
    as the trainers' collators give it on a GPU (positions, no mask) raise none, where the boolean selection does
    (the canary)."""
    torch.manual_seed(0)
    model = SptForMaskedLM(tiny_config(sparse_prediction=True)).to("cuda")
    collator = DataCollatorForSpt(tokenizer(), mlm_probability=0.5, return_masked_positions=True,
                                  omit_full_attention_mask=True)
    batch = {key: value.to("cuda") for key, value in collator([{"input_ids": row[:5]} for row in ROWS]).items()}
    assert "attention_mask" not in batch
    positions = batch.pop("masked_positions")
    torch.cuda.synchronize()
    try:
        torch.cuda.set_sync_debug_mode("error")
        model(**batch, masked_positions=positions).loss.backward()
        with pytest.raises(RuntimeError, match="synchroniz"):
            model(**batch).loss.backward()
    finally:
        torch.cuda.set_sync_debug_mode("default")
