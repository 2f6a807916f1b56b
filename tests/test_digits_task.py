"""The `digits` task: scikit-learn's bundled pictures as LRA-Image pixel sequences, fixed held-out splits,
seeded training subsets, and the same pictures read back through `--task image`."""

import sys
from collections import Counter

import numpy as np
import pytest

from hf_spt.errors import UserInputError
from hf_spt.models.tokenization_spt import NUM_SPECIAL_TOKENS
from hf_spt.tasks import load_task
from hf_spt.tasks.digits import digit_pixels, write_digits_image_folder

pytest.importorskip("sklearn")


def rows(dataset):
    return sorted(zip(map(tuple, dataset["input_ids"]), dataset["labels"]))


def test_held_out_splits_are_fixed_whatever_the_seed_and_num_train():
    full = load_task("digits", image_size=8)
    assert {split: len(data) for split, data in full.dataset.items()} == {"train": 1197, "validation": 200, "test": 400}
    for seed, num_train in ((0, 150), (3, 600)):
        subset = load_task("digits", image_size=8, seed=seed, num_train=num_train)
        assert len(subset.dataset["train"]) == num_train
        for split in ("validation", "test"):
            assert subset.dataset[split]["input_ids"] == full.dataset[split]["input_ids"]
        assert set(rows(subset.dataset["train"])) <= set(rows(full.dataset["train"]))
    # held-out sets and subsets drawn in proportion to the classes (near equal in digits: 15 each of 150); seeds
    # draw different subsets, a seed the same one twice
    assert max(Counter(full.dataset["test"]["labels"]).values()) - min(Counter(full.dataset["test"]["labels"]).values()) <= 2
    assert set(Counter(load_task("digits", image_size=8, num_train=150).dataset["train"]["labels"]).values()) == {15}
    first, again, other = (load_task("digits", image_size=8, num_train=150, seed=s).dataset["train"]["input_ids"]
                           for s in (1, 1, 2))
    assert first == again and first != other


@pytest.mark.parametrize("image_size", [8, 16, 32])
def test_pictures_are_pixel_tokens_of_the_shared_vocabulary(image_size):
    task = load_task("digits", image_size=image_size)
    ids = np.asarray(task.dataset["test"]["input_ids"])
    assert ids.shape == (400, image_size * image_size) and task.preset.max_length == image_size * image_size
    assert ids.min() == NUM_SPECIAL_TOKENS and ids.max() == NUM_SPECIAL_TOKENS + 255  # 0 and 16 become 0 and 255
    pathfinder = load_task("pathfinder", num_images=10, image_size=image_size if image_size > 8 else 16)
    assert task.tokenizer.get_vocab() == pathfinder.tokenizer.get_vocab()  # cross-task SPT reads the same ids


def test_upsampling_is_bilinear_from_the_scaled_native_picture():
    picture = np.zeros((1, 8, 8))
    picture[0, 3, 4] = 16
    native, upsampled = digit_pixels(picture, 8), digit_pixels(picture, 16)
    assert native[0, 3, 4] == 255 and native.sum() == 255
    assert upsampled.shape == (1, 16, 16) and 0 < upsampled.max() <= 255
    assert np.count_nonzero(upsampled) > 4  # spread over neighbours, not nearest-neighbour blocks


def test_the_image_task_reads_the_written_folder_as_the_same_tokens(tmp_path):
    root = write_digits_image_folder(tmp_path / "digits16", image_size=16)
    digits = load_task("digits", image_size=16)
    image = load_task("image", data_dir=str(root), image_size=16, cache_dir=str(tmp_path / "cache"))
    assert rows(image.dataset["test"]) == rows(digits.dataset["test"])
    train_rows = sorted(rows(image.dataset["train"]) + rows(image.dataset["validation"]))
    assert train_rows == sorted(rows(digits.dataset["train"]) + rows(digits.dataset["validation"]))
    assert image.label_names == digits.label_names


@pytest.mark.parametrize("options, message", [
    (dict(image_size=4), "image_size"),
    (dict(num_train=5), "num_train"),
    (dict(num_train=5000), "num_train"),
    (dict(num_validation=1000, num_test=1000), "num_validation"),
    (dict(data_dir="somewhere"), "--task image"),
])
def test_bad_options_are_named(options, message):
    with pytest.raises(UserInputError, match=message):
        load_task("digits", **options)


def test_without_scikit_learn_the_task_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "sklearn.datasets", None)
    with pytest.raises(UserInputError, match="pip install scikit-learn"):
        load_task("digits")
