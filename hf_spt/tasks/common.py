"""Helpers the file-based tasks share: clear errors for bad input, Hub loading, splits, tokenizing.

Every check here runs before any Arrow file is written: a task either builds completely or
raises one of these errors, naming the file (and line), what was expected and where the data
come from. Rows read from text files go through `Dataset.from_generator`, which caches them by
the file's path, size and modification time and writes nothing when reading fails part way.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
from datasets import Dataset, DatasetDict, List, Value, load_dataset, load_from_disk
from datasets.arrow_writer import SchemaInferenceError
from datasets.exceptions import DatasetGenerationError
from huggingface_hub import is_offline_mode

from ..errors import MissingInputError, UserInputError
from ..models.tokenization_spt import NUM_SPECIAL_TOKENS, build_word_tokenizer

PIXEL_VALUES = 256
TOKEN_IDS = List(Value("int32"))


class DataFormatError(UserInputError):
    """A data file exists but its content is not what the task expects."""


class HubDataUnavailableError(UserInputError, ConnectionError):
    """A Hub data set cannot be downloaded (offline or unreachable): a user error (one line, exit 2) that says how
    to use local files, and still a ConnectionError for callers that catch those."""


def require_path(path: str | Path, what: str, layout: str, source: str) -> Path:
    """`path` if it exists; otherwise a FileNotFoundError naming it, the expected layout and the data's origin."""
    path = Path(path)
    if not path.exists():
        raise MissingInputError(f"{what}: {path} does not exist.\nExpected layout:\n{layout}\nWhere the data come from: {source}")
    return path


def utf8_error(path: Path) -> DataFormatError | None:
    """The error naming the first line of `path` that is not UTF-8 (None: the file is valid UTF-8)."""
    data = Path(path).read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        return DataFormatError(f"{path}, line {line}: byte 0x{data[error.start]:02x} is not UTF-8 text. Save the file "
                               "as UTF-8 (e.g. `iconv -f latin1 -t utf-8`), or fix that line.")
    return None


def read_utf8(path: Path) -> str:
    """The text of `path`; a file that is not UTF-8 raises a DataFormatError naming the line."""
    if (error := utf8_error(path)) is not None:
        raise error
    return Path(path).read_text(encoding="utf-8")


CONTENT_HASHED_IMAGES = (".png", ".jpg", ".jpeg", ".gif", ".bmp", ".tif", ".tiff", ".webp")


def hash_file(path: Path, digest: "hashlib._Hash") -> None:
    """Feed the bytes of `path` into `digest`, a megabyte at a time."""
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)


def file_fingerprint(path: Path) -> str:
    """A digest of what `path` holds, so a cache entry follows the content, not the file's size and time (`cp -p`
    and `rsync -a` keep both while changing the bytes). A file: its bytes. A folder: every file's relative path
    and bytes, but images (thousands of them in the LRA releases), which count by path, size and modification
    time; their labels live in the metadata and list files, which count by content."""
    path = Path(path)
    digest = hashlib.sha256(str(path.resolve()).encode())
    if path.is_file():
        hash_file(path, digest)
        return digest.hexdigest()
    for item in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(item.relative_to(path)).encode() + b"\0")
        if item.suffix.lower() in CONTENT_HASHED_IMAGES:
            stat = item.stat()
            digest.update(f"{stat.st_size}:{stat.st_mtime_ns}".encode())
        else:
            hash_file(item, digest)
    return digest.hexdigest()


def content_cache_dir(paths: list[Path], cache_dir: str | None) -> str:
    """A `datasets` cache folder of its own for these files' content: `load_dataset`'s packaged readers key their
    cache by path and modification time, so a file changed in place would load its old rows."""
    from datasets import config

    digest = hashlib.sha256("".join(file_fingerprint(path) for path in paths).encode()).hexdigest()[:24]
    return str(Path(cache_dir or config.HF_DATASETS_CACHE) / "hf_spt_by_content" / digest)


def rows_to_dataset(read: Callable[..., Iterator[dict[str, Any]]], path: Path, cache_dir: str | None, **kwargs: Any) -> Dataset:
    """`Dataset.from_generator(read, path=..., ...)`, cached by the file's fingerprint; errors if no rows."""
    try:
        dataset = Dataset.from_generator(
            read, gen_kwargs=dict(path=str(path), fingerprint=file_fingerprint(path), **kwargs), cache_dir=cache_dir
        )
    except DatasetGenerationError as error:  # unwrap our own message (file and line) from datasets' wrapper
        if isinstance(error.__cause__, (DataFormatError, FileNotFoundError)):
            raise error.__cause__ from None
        if isinstance(error.__cause__, UnicodeDecodeError) and (not_utf8 := utf8_error(path)) is not None:
            raise not_utf8 from None
        if isinstance(error.__cause__, SchemaInferenceError):  # the reader yielded no row
            raise DataFormatError(f"{path} holds no examples (an empty split).") from None
        raise
    if len(dataset) == 0:
        raise DataFormatError(f"{path} holds no examples (an empty split).")
    return dataset


def hub_dataset(name: str, local_help: str, **kwargs: Any) -> DatasetDict:
    """`load_dataset(name)` from the Hub; offline or unreachable, a `HubDataUnavailableError` saying how to use
    local files."""
    message = (f"The Hub data set {name!r} cannot be downloaded here (HF_HUB_OFFLINE is set or the Hub is "
               f"unreachable). {local_help}")
    if is_offline_mode():
        raise HubDataUnavailableError(message)
    try:
        return load_dataset(name, **kwargs)
    except (ConnectionError, OSError, TimeoutError) as error:
        raise HubDataUnavailableError(message) from error


def is_saved_dataset(path: Path) -> bool:
    """Whether `path` is a folder written by `DatasetDict.save_to_disk`."""
    return (path / "dataset_dict.json").is_file()


def load_saved_dataset(path: Path) -> DatasetDict:
    data = load_from_disk(str(path))
    if isinstance(data, Dataset):
        raise DataFormatError(f"{path} holds one Dataset; save a DatasetDict with a 'train' split (and optionally "
                              "'validation' and 'test').")
    return data


def carve_validation(train: Dataset, fraction: float, seed: int, stratify_by: str | None = None) -> tuple[Dataset, Dataset]:
    """Split `fraction` of `train` off as validation, shuffled with `seed`."""
    if not 0 < fraction < 1:
        raise UserInputError(f"validation_fraction must be between 0 and 1, got {fraction}.")
    if len(train) < 2:
        raise DataFormatError(f"Cannot carve a validation split from a train split of {len(train)} example(s).")
    parts = train.train_test_split(test_size=fraction, seed=seed, stratify_by_column=stratify_by)
    return parts["train"], parts["test"]


def byte_ids(text: str, max_length: int | None) -> list[int]:
    """The byte tokenizer's ids of `text` (UTF-8 byte b is id 4 + b), cut at `max_length`, via numpy.

    Much faster than the tokenizer on 4000-byte documents (run_scripts/bench_byte_encoding.py); tests check both agree.
    """
    data = np.frombuffer(text.encode("utf-8"), dtype=np.uint8)[:max_length]
    return (data.astype(np.int32) + NUM_SPECIAL_TOKENS).tolist()


def byte_encode_column(
    dataset: Dataset, column: str, output_column: str, max_length: int | None, num_proc: int | None
) -> Dataset:
    """Byte ids of text `column` in `output_column`, cut at `max_length` (the task's definition, as in LRA; None: uncut)."""

    def encode(batch: dict[str, list]) -> dict[str, list]:
        return {output_column: [byte_ids(text, max_length) for text in batch[column]]}

    return dataset.map(encode, batched=True, num_proc=num_proc, desc=f"byte ids of {column}").cast_column(
        output_column, TOKEN_IDS)


def build_pixel_tokenizer(num_pixels: int):
    """Word-level tokenizer over "0".."255": pixel value v is token id 4 + v (the byte tokenizer's ids too)."""
    return build_word_tokenizer([str(value) for value in range(PIXEL_VALUES)], model_max_length=num_pixels)


def pixel_ids(pixels: np.ndarray) -> list[int]:
    """Token ids of a grayscale image (H, W) of values 0-255, row by row."""
    return (np.asarray(pixels, dtype=np.int64).reshape(-1) + NUM_SPECIAL_TOKENS).tolist()


def grayscale_pixels(image: Any, size: int) -> np.ndarray:
    """A PIL image as (size, size) grayscale values 0-255: PIL's ITU-R 601-2 luma (integer weights; LRA's
    `tf.image.rgb_to_grayscale` uses float ones, one level apart on some colour pixels: docs/tasks.md)."""
    image = image.convert("L")
    if image.size != (size, size):
        image = image.resize((size, size))
    return np.asarray(image, dtype=np.uint8)


__all__ = ["DataFormatError", "HubDataUnavailableError", "PIXEL_VALUES", "require_path", "utf8_error", "read_utf8", "hash_file", "file_fingerprint", "content_cache_dir", "rows_to_dataset", "hub_dataset",
           "is_saved_dataset", "load_saved_dataset", "carve_validation", "byte_ids", "byte_encode_column", "build_pixel_tokenizer",
           "pixel_ids", "grayscale_pixels"]
