"""Write scikit-learn's handwritten digits as an image folder that `--task image --data_dir` reads.

    python run_scripts/generate_digits_images.py --output_dir data/digits16 --image_size 16
    python run_scripts/run_spt.py --task image --data_dir data/digits16 --task_options '{"image_size": 16}'

The pictures are the `digits` task's (intensities scaled to 0-255, upsampled bilinearly above 8x8):
`train/<digit>/<index>.png` holds its training pool and validation pictures (the image task carves its own
validation split from them), `test/<digit>/<index>.png` its test pictures. See docs/tasks.md.

`--output_dir` is checked as a run's is (an empty name, a file, a folder that cannot be written: one line, exit
status 2), and the export writes only into a new or empty folder or a previous export of the same `--image_size`
(`hf_spt.runs.export_folder`), so it never overwrites a file it did not write.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from transformers import HfArgumentParser

from hf_spt.experiments.exit_status import run_cli
from hf_spt.runs.export_folder import claim_export_folder
from hf_spt.tasks.digits import check_image_size, write_digits_image_folder


@dataclass
class DigitsImageArguments:
    output_dir: str = field(metadata={"help": "Folder to write train/<digit>/*.png and test/<digit>/*.png into."})
    image_size: int = field(default=16, metadata={"help": "Side in pixels: 8 (native) or more (upsampled)."})


def run(args: DigitsImageArguments) -> None:
    """The digits at `args.image_size` written under `args.output_dir`, once `claim_export_folder` allows it."""
    check_image_size(args.image_size)
    root = claim_export_folder(args.output_dir, {"export": "digits images", "image_size": args.image_size})
    write_digits_image_folder(root, args.image_size)
    print(f"Wrote the digits at {args.image_size}x{args.image_size} under {root}")


def main(argv: list[str] | None = None) -> None:
    """`hf-spt generate-digits-images`: `run` on the flags in `argv` (default: the command line), ended by `run_cli`."""
    run_cli(lambda flags: run(*HfArgumentParser(DigitsImageArguments).parse_args_into_dataclasses(args=flags)), argv)


if __name__ == "__main__":
    main()
