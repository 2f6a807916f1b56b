"""benchmarks/pathfinder_learnability.py: its control labels are balanced and read the geometry they name, a model
flag the chosen model does not read is an error, and both reference models train on generated images."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "pathfinder_learnability.py"
spec = importlib.util.spec_from_file_location("pathfinder_learnability", SCRIPT)
learnability = importlib.util.module_from_spec(spec)
spec.loader.exec_module(learnability)


def test_control_labels_are_balanced_and_read_rows_columns_and_counts():
    rng = np.random.default_rng(0)
    images = np.zeros((200, 8, 8), np.uint8)
    for image, count in zip(images, rng.integers(1, 20, 200)):
        image.flat[rng.choice(64, count, replace=False)] = 255
    paths = np.arange(200) % 2
    assert (learnability.control_labels(images, paths, "path") == paths).all()
    for kind in ("lit_above_median", "more_lit_top", "more_lit_left"):
        assert abs(learnability.control_labels(images, paths, kind).mean() - 0.5) < 0.1, kind
    left, top = np.zeros((1, 8, 8), np.uint8), np.zeros((1, 8, 8), np.uint8)
    left[0, 6, 1] = 255  # bottom-left pixel: more lit on the left, not on top
    top[0, 1, 6] = 255  # top-right pixel: more lit on top, not on the left
    for image, top_label, left_label in ((left, 0, 1), (top, 1, 0)):
        assert learnability.control_labels(image, paths[:1], "more_lit_top")[0] == top_label
        assert learnability.control_labels(image, paths[:1], "more_lit_left")[0] == left_label
    counts = (images > 0).reshape(200, -1).sum(1)
    brighter = learnability.control_labels(images, paths, "lit_above_median") == 1
    assert counts[brighter].min() >= counts[~brighter].max()


@pytest.mark.parametrize("argv, unread", [
    (["--hidden_size", "8"], "--model cnn does not read --hidden_size"),
    (["--model", "transformer", "--channels", "8"], "--model transformer does not read --channels"),
    (["--model", "transformer", "--init_from", "spt", "--depth", "2"], "--init_from does not read --depth"),
])
def test_a_flag_the_model_does_not_read_is_an_error(argv, unread, capsys):
    with pytest.raises(SystemExit):
        learnability.main(argv)
    assert unread in capsys.readouterr().err


@pytest.mark.parametrize("model", ["cnn", "transformer"])
def test_reference_models_train_on_generated_images(model):
    summary = learnability.main(["--model", model, "--depth", "1", "--image_size", "24", "--contour_length", "2",
                                 "--num_distractors", "0", "--num_images", "40", "--epochs", "1",
                                 "--label", "more_lit_left", "--torch_threads", "1"])
    assert summary["config"]["model"] == model and summary["config"]["label"] == "more_lit_left"
    assert summary["best_epoch"] == 1 and 0.0 <= summary["test_accuracy"] <= 1.0
