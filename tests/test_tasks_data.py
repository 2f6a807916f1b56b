"""Every task loads from files in its published layout (and from its generator), and bad input fails early."""

from __future__ import annotations

import random

import numpy as np
import pytest
from task_files import (SHORT_LISTOPS, write_aan, write_custom_csv, write_image_folder, write_imdb, write_listops,
                        write_pathfinder_release)

from hf_spt.errors import UserInputError
from hf_spt.tasks import load_task
from hf_spt.tasks.common import DataFormatError
from hf_spt.tasks.listops import evaluate_listops, strip_parentheses
from hf_spt.tasks.listops_generator import generate_listops, generate_listops_example
from hf_spt.tasks.pathfinder_generator import generate_pathfinder, pathfinder_drawings

SPLITS = ("train", "validation", "test")


def test_generated_listops_labels_agree_with_the_evaluator_and_lengths_match_the_spec():
    rng = random.Random(1)
    for _ in range(60):
        source, label = generate_listops_example(rng)
        tokens = strip_parentheses(source).split()
        assert 500 < len(tokens) < 2000
        assert evaluate_listops(source) == label
        assert evaluate_listops(" ".join(tokens)) == label


def test_listops_evaluator_on_hand_written_expressions():
    assert evaluate_listops("[MAX 2 9 [MIN 4 7 ] 0 ]") == 9
    assert evaluate_listops("[SM 5 6 [MED 1 2 3 8 ] ]") == 3  # median of 1 2 3 8 is 2.5 -> 2; 5+6+2 = 13
    assert evaluate_listops("( ( ( [MIN 3 ) 1 ) ] )") == 1
    with pytest.raises(ValueError):
        evaluate_listops("[MAX 2 3")


def test_generated_labels_match_trees_evaluated_by_hand():
    """Labels of pinned generated trees, worked out by hand (MED of an even count rounds down, SM is mod 10)."""
    expected = [
        # MED(8, 0) = 4; MAX(4, 5, 1) = 5; MAX(5, 7, 8) = 8; SM(8, 9, 5) = 22 mod 10
        ("( ( ( ( [SM ( ( ( ( [MAX ( ( ( ( [MAX ( ( ( [MED 8 ) 0 ) ] ) ) 5 ) 1 ) ] ) ) 7 ) 8 ) ] ) ) 9 ) 5 ) ] )", 2),
        # MED(3, 5, 5) = 5; SM(5, 4) = 9; MIN(5, 1, 9) = 1; MED(9, 1) = 5
        ("( ( ( [MED ( ( ( [SM ( ( ( ( [MED 3 ) 5 ) 5 ) ] ) ) 4 ) ] ) ) ( ( ( ( [MIN 5 ) 1 ) 9 ) ] ) ) ] )", 5),
        # MIN(6, 6, 5) = 5; MAX(9, 5) = 9; SM(5, 9, 2) = 16 mod 10
        ("( ( ( ( [SM ( ( ( ( [MIN 6 ) 6 ) 5 ) ] ) ) ( ( ( [MAX 9 ) 5 ) ] ) ) 2 ) ] )", 6),
    ]
    generated = [generate_listops_example(random.Random(seed), min_length=8, max_length=20, max_args=3) for seed in range(3)]
    assert generated == expected
    assert [evaluate_listops(source) for source, _ in expected] == [label for _, label in expected]


def test_listops_generation_is_seeded_and_independent_of_workers():
    sizes = {"train": 3, "validation": 2, "test": 2}
    one = generate_listops(sizes, seed=5, num_workers=1, **SHORT_LISTOPS)
    two = generate_listops(sizes, seed=5, num_workers=2, **SHORT_LISTOPS)
    assert one == two and [len(rows) for rows in one.values()] == [3, 2, 2]
    assert generate_listops(sizes, seed=6, num_workers=1, **SHORT_LISTOPS) != one


def test_listops_loads_released_tsvs(tmp_path):
    task = load_task("listops", data_dir=str(write_listops(tmp_path / "listops")), cache_dir=str(tmp_path / "cache"))
    row = task.dataset["train"][0]
    decoded = task.tokenizer.decode(row["input_ids"])
    assert evaluate_listops(decoded) == row["labels"]
    assert task.preset.num_labels == 10 and task.preset.mlm_probability == 0.1


def test_listops_generates_without_data_dir(tmp_path):
    task = load_task("listops", num_train=6, num_validation=2, num_test=2, cache_dir=str(tmp_path), **SHORT_LISTOPS)
    assert [len(task.dataset[s]) for s in SPLITS] == [6, 2, 2]
    for row in task.dataset["train"]:
        assert evaluate_listops(task.tokenizer.decode(row["input_ids"])) == row["labels"]


def test_numpy_byte_ids_equal_the_byte_tokenizer():
    from hf_spt.tasks.common import byte_ids
    from hf_spt.models.tokenization_spt import build_byte_tokenizer

    tokenizer = build_byte_tokenizer()
    for text in ("plain ascii", "Ünïcode — 漢字 🙂\ttabs\nlines", ""):
        assert byte_ids(text, None) == tokenizer(text)["input_ids"]
        assert byte_ids(text, 5) == tokenizer(text, truncation=True, max_length=5)["input_ids"]


def test_text_loads_aclimdb_folder_at_byte_level(tmp_path):
    task = load_task("text", data_dir=str(write_imdb(tmp_path / "aclImdb")), max_length=1000,
                     cache_dir=str(tmp_path / "cache"))
    assert sum(len(task.dataset[s]) for s in ("train", "validation")) == 12 and len(task.dataset["test"]) == 12
    row = task.dataset["test"][0]
    assert task.tokenizer.decode(row["input_ids"]).startswith("Review 0: a dreadful")
    assert len(row["input_ids"]) == len("Review 0: a dreadful, dull film. Ünïcode ok.".encode())
    assert task.preset.max_length == 1000


def test_retrieval_loads_aan_tsvs_as_pairs(tmp_path):
    task = load_task("retrieval", data_dir=str(write_aan(tmp_path / "aan")), max_length=12, cache_dir=str(tmp_path / "c"))
    assert task.is_pair and task.preset.model["num_hidden_layers"] == 4
    row = task.dataset["validation"][1]
    assert task.tokenizer.decode(row["input_ids"]) == "paper 1 on p"  # cut at 12 bytes
    assert task.tokenizer.decode(row["pair_input_ids"]) == "paper 1 cite" and row["labels"] == 1


def test_image_loads_image_folder_as_grayscale_pixels(tmp_path):
    task = load_task("image", data_dir=str(write_image_folder(tmp_path / "images")), image_size=8)
    assert len(task.dataset["train"]) + len(task.dataset["validation"]) == 12
    ids = task.dataset["test"][0]["input_ids"]
    assert len(ids) == 64 and 4 <= min(ids) and max(ids) <= 259 and len(task.tokenizer) == 260
    assert task.label_names == ["cat", "dog"] and task.preset.mlm_probability == 0.5


def test_image_loads_a_saved_cifar10_style_datasetdict(tmp_path):
    import numpy as np
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Image

    from PIL import Image as PILImage

    features = Features({"img": Image(), "label": ClassLabel(names=["airplane", "automobile"])})
    pictures = [PILImage.fromarray(np.full((32, 32, 3), 10 * k, dtype=np.uint8)) for k in range(10)]
    split = Dataset.from_dict({"img": pictures, "label": [k % 2 for k in range(10)]}, features=features)
    DatasetDict(train=split, test=split).save_to_disk(str(tmp_path / "cifar"))
    task = load_task("image", data_dir=str(tmp_path / "cifar"))
    assert task.label_names == ["airplane", "automobile"] and task.preset.max_length == 1024
    row = task.dataset["test"][3]
    assert row["input_ids"] == [4 + 30] * 1024 and row["labels"] == 1


def test_pathfinder_loads_released_layout_and_generates(tmp_path):
    root = write_pathfinder_release(tmp_path / "pathfinder32")
    assert (root / "curv_contour_length_14" / "imgs" / "0" / "sample_3.png").is_file()
    released = load_task("pathfinder", data_dir=str(root), cache_dir=str(tmp_path / "cache"))
    assert [len(released.dataset[s]) for s in SPLITS] == [24, 3, 3]
    generated = load_task("pathfinder", num_images=30, cache_dir=str(tmp_path / "cache"))
    all_ids = {tuple(row["input_ids"]) for s in SPLITS for row in generated.dataset[s]}
    assert len(all_ids) == 30 and len(next(iter(all_ids))) == 1024
    assert sum(row["labels"] for s in SPLITS for row in generated.dataset[s]) == 15
    pathx = load_task("pathx", num_images=4, cache_dir=str(tmp_path / "cache"))
    assert len(pathx.dataset["train"][0]["input_ids"]) == 128 * 128 and pathx.preset.max_length == 16384


def test_generated_pathfinder_difficulty_options(tmp_path):
    """Shorter paths and no distractors draw fewer path pixels; the options reach the generator, bad values are refused."""
    def bright(**options) -> float:
        task = load_task("pathfinder", num_images=20, image_size=24, cache_dir=str(tmp_path / "cache"), **options)
        return float(np.mean([np.mean(np.array(row["input_ids"]) > 4 + 127) for row in task.dataset["train"]]))

    hard, easy = bright(), bright(contour_length=4, num_distractors=0)
    assert easy < 0.6 * hard
    with pytest.raises(UserInputError, match="num_distractors"):
        load_task("pathfinder", num_images=4, num_distractors=-1, cache_dir=str(tmp_path / "cache"))


def test_pathfinder_control_labels_read_the_halves_of_the_same_images(tmp_path):
    """`label` keeps the images and replaces the path label with which half holds more lit pixels."""
    def load(label):
        return load_task("pathfinder", num_images=40, image_size=24, contour_length=2, num_distractors=0,
                         cache_dir=str(tmp_path / "cache"), label=label)

    path, left, top = load("path"), load("more_lit_left"), load("more_lit_top")
    assert left.label_names == ["right_half", "left_half"] and top.label_names == ["bottom_half", "top_half"]
    for split in SPLITS:
        assert path.dataset[split]["input_ids"] == left.dataset[split]["input_ids"] == top.dataset[split]["input_ids"]
        for row, left_label, top_label in zip(path.dataset[split], left.dataset[split]["labels"],
                                              top.dataset[split]["labels"]):
            lit = np.array(row["input_ids"]).reshape(24, 24) > 4
            for label, (first, second) in ((left_label, (lit[:, :12], lit[:, 12:])),
                                           (top_label, (lit[:12], lit[12:]))):
                if first.sum() != second.sum():
                    assert label == int(first.sum() > second.sum())
    assert 10 <= sum(left.dataset["train"]["labels"]) + sum(left.dataset["test"]["labels"]) <= 26
    with pytest.raises(UserInputError, match="unknown label 'diagonal'"):
        load("diagonal")


def _same_points(a, b) -> bool:
    return {tuple(p) for p in np.round(a, 6)} == {tuple(p) for p in np.round(b, 6)}


@pytest.mark.parametrize("image_size", [32, 64])
def test_pathfinder_label_is_1_exactly_when_the_marked_points_are_the_ends_of_one_path(image_size):
    drawings = list(pathfinder_drawings(60, seed=3, image_size=image_size))
    for k, drawing in enumerate(drawings):
        for path, ends in zip(drawing.paths, drawing.ends):  # the ends are the drawn path's first and last points
            np.testing.assert_allclose(ends, path[[0, -1]])
        one_path = any(_same_points(drawing.marked, ends) for ends in drawing.ends)
        one_end_of_each = all(any(_same_points([point], [end]) for point in drawing.marked for end in ends)
                              for ends in drawing.ends)
        assert drawing.label == int(one_path), f"image {k}: label {drawing.label}, marked on one path: {one_path}"
        assert drawing.label == 1 or one_end_of_each, f"image {k}: a negative marks one end of each path"
        x, y = np.rint(drawing.marked).astype(int).T
        assert (drawing.image[y, x] == 255).all(), f"image {k}: the marked discs are painted"
    images, labels = generate_pathfinder(60, seed=3, image_size=image_size)
    assert (labels == [d.label for d in drawings]).all() and (images == np.stack([d.image for d in drawings])).all()


def test_custom_csv_with_string_labels(tmp_path):
    files = write_custom_csv(tmp_path / "mine")
    task = load_task("custom", train_file=files["train"], test_file=files["test"], cache_dir=str(tmp_path / "cache"))
    assert task.label_names == ["angry", "happy", "sad"] and task.id2label()[1] == "happy"
    assert len(task.dataset["train"]) + len(task.dataset["validation"]) == 24
    row = task.dataset["test"][0]
    assert task.tokenizer.decode(row["input_ids"]) == "I feel happy, 0" and row["labels"] == 1


def test_custom_jsonl_pairs_and_pretokenized_parquet(tmp_path):
    import pandas as pd

    rows = [{"a": f"q{k}", "b": f"d{k}", "y": k % 2} for k in range(10)]
    pd.DataFrame(rows).to_json(tmp_path / "train.jsonl", orient="records", lines=True)
    pairs = load_task("custom", train_file=str(tmp_path / "train.jsonl"), text_column="a", text_pair_column="b",
                      label_column="y", cache_dir=str(tmp_path / "cache"))
    assert pairs.is_pair and "pair_input_ids" in pairs.dataset["test"].column_names and pairs.label_names is None
    pd.DataFrame({"input_ids": [[5, 300, 7]] * 10, "label": [0, 1] * 5}).to_parquet(tmp_path / "train.parquet")
    ids = load_task("custom", train_file=str(tmp_path / "train.parquet"), cache_dir=str(tmp_path / "cache"))
    assert ids.dataset["train"][0]["input_ids"] == [5, 300, 7] and len(ids.tokenizer) == 301


# ---- bad input: clear errors before training, nothing half-written in the cache ----


def _arrow_files(folder):
    return sorted(str(p) for p in folder.rglob("*.arrow")) if folder.exists() else []


def test_missing_folder_names_the_path_layout_and_source(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"new_aan_pairs\.train\.tsv(.|\n)*lra_release"):
        load_task("retrieval", data_dir=str(tmp_path / "nowhere"))
    write_listops(tmp_path / "lo")
    (tmp_path / "lo" / "basic_val.tsv").unlink()
    with pytest.raises(FileNotFoundError, match=r"basic_val\.tsv does not exist(.|\n)*generate_listops"):
        load_task("listops", data_dir=str(tmp_path / "lo"), cache_dir=str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match=r"curv_contour_length_14"):
        load_task("pathfinder", data_dir=str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"nope\.csv"):
        load_task("custom", train_file=str(tmp_path / "nope.csv"))


def test_malformed_row_names_file_and_line_and_leaves_no_cache(tmp_path):
    folder = write_aan(tmp_path / "aan")
    lines = (folder / "new_aan_pairs.eval.tsv").read_text().splitlines(keepends=True)
    lines[2] = "1\tP2\tonly three fields\n"
    (folder / "new_aan_pairs.eval.tsv").write_text("".join(lines))
    cache = tmp_path / "cache"
    with pytest.raises(DataFormatError, match=r"new_aan_pairs\.eval\.tsv, line 3: expected 5"):
        load_task("retrieval", data_dir=str(folder), cache_dir=str(cache))
    assert not [f for f in _arrow_files(cache) if "eval" in f or "validation" in f]
    assert not [p for p in cache.rglob("*incomplete*") if p.suffix != ".lock"]  # lock files hold no data
    root = write_pathfinder_release(tmp_path / "pf", num_images=4)
    (root / "curv_contour_length_14" / "imgs" / "0" / "sample_2.png").unlink()
    with pytest.raises(FileNotFoundError, match=r"metadata/0\.npy, line 3: image .*sample_2\.png does not exist"):
        load_task("pathfinder", data_dir=str(root), cache_dir=str(cache))
    (tmp_path / "bad.csv").write_text('text,label\n"fine",a\n"one field too many",b,c\n')
    with pytest.raises(DataFormatError, match=r"bad\.csv: .*line 3"):
        load_task("custom", train_file=str(tmp_path / "bad.csv"), cache_dir=str(cache))


def test_unknown_labels_fail(tmp_path):
    folder = write_listops(tmp_path / "lo")
    lines = (folder / "basic_test.tsv").read_text().splitlines(keepends=True)
    lines[1] = lines[1].split("\t")[0] + "\tseven\n"
    (folder / "basic_test.tsv").write_text("".join(lines))
    with pytest.raises(DataFormatError, match=r"basic_test\.tsv, line 2: unknown label"):
        load_task("listops", data_dir=str(folder), cache_dir=str(tmp_path / "cache"))
    files = write_custom_csv(tmp_path / "mine")
    with open(files["test"], "a") as handle:
        handle.write("\"I feel bored\",bored\n")
    with pytest.raises(DataFormatError, match=r"test split: unknown label\(s\) \['bored'\]"):
        load_task("custom", train_file=files["train"], test_file=files["test"], cache_dir=str(tmp_path / "cache"))


def test_empty_split_fails(tmp_path):
    folder = write_listops(tmp_path / "lo")
    (folder / "basic_val.tsv").write_text("Source\tTarget\n")
    with pytest.raises(DataFormatError, match=r"basic_val\.tsv holds no examples"):
        load_task("listops", data_dir=str(folder), cache_dir=str(tmp_path / "cache"))
    files = write_custom_csv(tmp_path / "mine")
    (tmp_path / "mine" / "test.csv").write_text("text,label\n")
    with pytest.raises(DataFormatError, match="test split is empty"):
        load_task("custom", train_file=files["train"], test_file=files["test"], cache_dir=str(tmp_path / "cache"))


def test_hub_dataset_offline_says_how_to_use_local_files(monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ConnectionError, match=r"'imdb'(.|\n)*--data_dir"):
        load_task("text")
    with pytest.raises(ConnectionError, match=r"'cifar10'(.|\n)*--data_dir"):
        load_task("image")
