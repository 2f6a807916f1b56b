"""Every writer as careful as a run (issues 40 and 47): the exporters (digits pictures, ListOps and Pathfinder
generators), the analysis and the compute report refuse an output folder a run would refuse (an empty name, a file,
a path under a file, a folder that cannot be written) in one line with exit status 2, the exporters never overwrite
a file they did not write, and messages name the flag the user typed and the folder read. One table drives the
refusals; each is checked to change no file (the folders are hashed before and after).

Read-only folders: the tests run as root, which writes through any permission bits, so `chmod` proves nothing.
`READ_ONLY` is a real one (/proc refuses root too); `read_only` simulates a read-only file system over a folder
by making `os.open` fail with EROFS for any write under it, which is how `check_writable_folder` tries its write.
A writer that skipped the check would write with Python's `open` or PIL, which the simulation does not stop: its
files would change the folder's hash and fail the test.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import runpy
import sys
from pathlib import Path

import pytest

from hf_spt.experiments.exit_status import USER_ERROR_STATUS
from hf_spt.experiments.pipeline import run_experiment
from hf_spt.runs.export_folder import EXPORT_MARKER_NAME
from hf_spt.tasks import load_task
from tiny_backbone_runs import tiny_arguments

ROOT = Path(__file__).resolve().parents[1]
READ_ONLY = "/proc/hf_spt_output"  # under a folder no process can create files in, root included
USER_FILES = {"train/0/0000.png": b"the user's own picture", "notes.txt": b"the user's notes",
              "basic_train.tsv": b"Source\tTarget\nthe user's own trees\t0\n",
              "curv_contour_length_14/imgs/0/sample_0.png": b"a release's own image",
              "curv_contour_length_14/metadata/0.npy": b"imgs/0 sample_0.png 0 1 32 14\n"}
LISTOPS = ["--num_train", "4", "--num_validation", "2", "--num_test", "2", "--min_length", "5", "--max_length", "60",
           "--num_workers", "1"]  # seconds, should a refusal fail to stop it
PATHFINDER = ["--num_images", "4"]


def run_script(name: str, argv: list[str], monkeypatch) -> int:
    """The exit status of `run_scripts/<name>.py argv` run as its command line runs it (its `__main__` block), in
    this process so that the simulated read-only folder holds."""
    path = ROOT / "run_scripts" / f"{name}.py"
    monkeypatch.setattr(sys, "argv", [str(path), *argv])
    try:
        runpy.run_path(str(path), run_name="__main__")
    except SystemExit as stop:
        return stop.code
    return 0


def tree_digest(*folders: Path) -> str:
    """A digest of every folder and file under `folders`: names and bytes."""
    digest = hashlib.sha256()
    for folder in folders:
        for path in sorted(folder.rglob("*")):
            digest.update(str(path.relative_to(folder)).encode() + b"\0")
            if path.is_file():
                digest.update(path.read_bytes())
    return digest.hexdigest()


def awkward_places(tmp_path: Path) -> dict[str, Path]:
    """{dangling}: a symbolic link to a folder that does not exist; {long}: a name over the file system's limit."""
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    return {"dangling": tmp_path / "dangling", "long": tmp_path / ("x" * 300)}


def write_user_files(folder: Path) -> Path:
    for name, content in USER_FILES.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    return folder


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A finished tiny run_spt.py run (--mode scratch, one epoch): what the analysis and the compute report read."""
    folder = tmp_path_factory.mktemp("finished") / "run"
    run_experiment(*tiny_arguments(folder, mode="scratch"))
    return folder


@pytest.fixture
def read_only(monkeypatch, finished_run, tmp_path) -> Path:
    """A folder of user files, and the finished run, on a simulated read-only file system (module docstring)."""
    folder = write_user_files(tmp_path / "read_only")
    real_open = os.open
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT

    def refusing_open(path, flags, *args, **kwargs):
        if flags & write_flags and any(Path(path).absolute().is_relative_to(root) for root in (folder, finished_run)):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refusing_open)
    return folder


ANALYSIS_OPTIONS = ["--num_examples", "4", "--probe_batch_size", "4", "--frequency_buckets", "2"]

REFUSALS = [  # (script, argv: {user} a folder of the user's files, {file} a file, {run} the finished run; words)
    ("generate_digits_images", ["--output_dir", "{user}", "--image_size", "8"],
     "--output_dir {user} holds files this command did not write"),
    ("generate_digits_images", ["--output_dir", ""], "--output_dir is empty"),
    ("generate_digits_images", ["--output_dir", "{file}"], "--output_dir {file} is a file, not a folder"),
    ("generate_digits_images", ["--output_dir", "{file}/digits"], "is a file, so the folder cannot be made there"),
    ("generate_digits_images", ["--output_dir", "{read_only}"], "--output_dir {read_only} cannot be written"),
    ("generate_digits_images", ["--output_dir", "{read_only}/digits"], "cannot be written (Read-only file system)"),
    ("generate_digits_images", ["--output_dir", READ_ONLY], f"--output_dir {READ_ONLY} cannot be written"),
    ("generate_listops", ["--output_dir", "{user}", *LISTOPS], "--output_dir {user} holds files this command did not "
     "write"),
    ("generate_listops", ["--output_dir", "", *LISTOPS], "--output_dir is empty"),
    ("generate_listops", ["--output_dir", "{file}", *LISTOPS], "--output_dir {file} is a file, not a folder"),
    ("generate_listops", ["--output_dir", "{file}/listops", *LISTOPS], "is a file, so the folder cannot be made there"),
    ("generate_listops", ["--output_dir", "{read_only}", *LISTOPS], "--output_dir {read_only} cannot be written"),
    ("generate_listops", ["--output_dir", READ_ONLY, *LISTOPS], f"--output_dir {READ_ONLY} cannot be written"),
    ("generate_listops", ["--output_dir", "{user}/new", *LISTOPS, "--max_length", "5"], "no tree fits between 5 and 5"),
    ("generate_pathfinder", ["--output_dir", "{user}", *PATHFINDER], "--output_dir's difficulty folder "
     "{user}/curv_contour_length_14 holds files this command did not write"),
    ("generate_pathfinder", ["--output_dir", "", *PATHFINDER], "--output_dir is empty"),
    ("generate_pathfinder", ["--output_dir", "{file}", *PATHFINDER], "--output_dir {file} is a file, not a folder"),
    ("generate_pathfinder", ["--output_dir", "{file}/pf", *PATHFINDER], "is a file, so the folder cannot be made there"),
    ("generate_pathfinder", ["--output_dir", "{read_only}", *PATHFINDER], "--output_dir {read_only} cannot be written"),
    ("generate_pathfinder", ["--output_dir", "{read_only}/pf", *PATHFINDER], "cannot be written (Read-only file system)"),
    ("generate_pathfinder", ["--output_dir", READ_ONLY, *PATHFINDER], f"--output_dir {READ_ONLY} cannot be written"),
    ("run_analysis", ["--run", "{run}", *ANALYSIS_OPTIONS], "--output_dir (by default RUN/analysis) {run}/analysis "
     "cannot be written"),
    ("run_analysis", ["--run", "{run}", "--output_dir", "", *ANALYSIS_OPTIONS], "--output_dir is empty"),
    ("run_analysis", ["--run", "{run}", "--output_dir", "{file}", *ANALYSIS_OPTIONS], "is a file, not a folder"),
    ("run_analysis", ["--run", "{run}", "--output_dir", READ_ONLY, *ANALYSIS_OPTIONS], "cannot be written"),
    ("run_compute_curves", ["--runs", "{user}/missing"], "--runs {user}/missing: no such folder or file"),
    ("run_compute_curves", ["--runs", ","], "--runs ',' names no folder or file"),
    ("run_compute_curves", ["--runs", "{user}"], "--runs {user}: no results.json or grid.json there; --runs takes"),
    ("run_compute_curves", ["--runs", "{run}", "--output_dir", ""], "--output_dir is empty"),
    ("run_compute_curves", ["--runs", "{run}"], "--output_dir (by default the folder of --runs) {run} cannot be "
     "written"),
    # issue 54: the combined budget report, the Pathfinder figure, and every generator flag checked before a write
    ("run_budget_study", ["--combine", "{run}", "--output_dir", "{read_only}"], "--output_dir {read_only} cannot be "
     "written"),
    ("run_budget_study", ["--combine", "{run}", "--output_dir", "{file}"], "--output_dir {file} is a file, not a "
     "folder"),
    ("run_budget_study", ["--combine", "{run}", "--output_dir", READ_ONLY], f"--output_dir {READ_ONLY} cannot be "
     "written"),
    ("pathfinder_examples", ["--output", ""], "--output is empty"),
    ("pathfinder_examples", ["--output", "{user}"], "--output {user} is a folder, not a file"),
    ("pathfinder_examples", ["--output", "{read_only}/examples.png"], "--output's folder {read_only} cannot be "
     "written"),
    ("pathfinder_examples", ["--output", f"{READ_ONLY}/examples.png"], "cannot be written"),
    ("pathfinder_examples", ["--output", "{file}/examples.png"], "--output's folder {file} is a file, not a folder"),
    ("pathfinder_examples", ["--output", "{user}/examples.xyz"], "--output {user}/examples.xyz: name a file ending in"),
    ("pathfinder_examples", ["--output", "{user}/examples.png", "--seed", "-1"], "--seed -1: must be a whole number"),
    ("generate_pathfinder", ["--output_dir", "{user}/new", *PATHFINDER, "--image_size", "0"], "--image_size 0: must be "
     "a whole number >= 1"),
    ("generate_pathfinder", ["--output_dir", "{user}/new", *PATHFINDER, "--contour_length", "0"], "--contour_length 0: "
     "must be a whole number >= 1"),
    ("generate_pathfinder", ["--output_dir", "{user}/new", "--num_images", "0"], "--num_images 0: must be"),
    ("generate_pathfinder", ["--output_dir", "{user}/new", *PATHFINDER, "--seed", "-1"], "--seed -1: must be"),
    ("generate_listops", ["--output_dir", "{user}/new", *LISTOPS, "--num_workers", "-1"], "--num_workers -1: must be a "
     "whole number >= 1"),
    ("generate_listops", ["--output_dir", "{user}/new", *LISTOPS, "--num_train", "-5"], "--num_train -5: must be"),
    ("generate_listops", ["--output_dir", "{user}/new", *LISTOPS, "--num_test", "0"], "--num_test 0: must be"),
    # issue 66: a symbolic link to nothing (FileExistsError), a name too long, a length range no tree fits (a hang)
    ("run_spt", ["--output_dir", "{dangling}"], "--output_dir {dangling}: {dangling} is a symbolic link to "),
    ("run_spt", ["--output_dir", "{dangling}/run"], "{dangling} is a symbolic link to"),
    ("run_spt", ["--output_dir", "{long}"], "--output_dir {long} cannot be a folder here (File name too long)"),
    ("run_budget_study", ["--combine", "{run}", "--output_dir", "{dangling}"], "--output_dir {dangling}: {dangling} "
     "is a symbolic link to"),
    ("generate_listops", ["--output_dir", "{user}/new", *LISTOPS, "--min_length", "3", "--max_length", "4"],
     "no tree fits between 3 and 4"),
    ("generate_listops", ["--output_dir", "{dangling}", *LISTOPS], "{dangling} is a symbolic link to"),
]


@pytest.mark.parametrize("name, argv, words", REFUSALS, ids=[f"{name} {' '.join(argv)}" for name, argv, _ in REFUSALS])
def test_a_folder_a_run_would_refuse_is_one_line_exit_2_and_no_file_changes(name, argv, words, tmp_path, finished_run,
                                                                              read_only, monkeypatch, capsys):
    places = {"user": write_user_files(tmp_path / "user"), "file": tmp_path / "user" / "notes.txt",
              "run": finished_run, "read_only": read_only, **awkward_places(tmp_path)}
    before = tree_digest(tmp_path, finished_run)
    status = run_script(name, [arg.format(**places) for arg in argv], monkeypatch)
    err = capsys.readouterr().err
    assert status == USER_ERROR_STATUS and err.startswith("error: ") and err.count("\n") == 1, err
    assert words.format(**places) in err, err
    assert tree_digest(tmp_path, finished_run) == before


def test_a_read_only_run_is_analysed_into_another_folder(tmp_path, finished_run, read_only, monkeypatch):
    before = tree_digest(finished_run)
    status = run_script("run_analysis", ["--run", str(finished_run), "--output_dir", str(tmp_path / "report"),
                                         *ANALYSIS_OPTIONS], monkeypatch)
    assert status == 0 and json.loads((tmp_path / "report" / "report.json").read_text())["task"] == "markov"
    assert tree_digest(finished_run) == before


def test_the_exporter_completes_its_own_export_and_refuses_another_size(tmp_path, monkeypatch, capsys):
    """A fresh folder gets the pictures and the marker (which the image task's reader skips); the same command again
    rewrites the same bytes; another --image_size into it is refused, its export unchanged."""
    folder = tmp_path / "digits8"
    assert run_script("generate_digits_images", ["--output_dir", str(folder), "--image_size", "8"], monkeypatch) == 0
    assert json.loads((folder / EXPORT_MARKER_NAME).read_text()) == {"export": "digits images", "image_size": 8}
    image = load_task("image", data_dir=str(folder), image_size=8, cache_dir=str(tmp_path / "cache"))
    assert sum(map(len, image.dataset.values())) == len(list(folder.rglob("*.png"))) == 1797
    exported = tree_digest(folder)
    assert run_script("generate_digits_images", ["--output_dir", str(folder), "--image_size", "8"], monkeypatch) == 0
    assert tree_digest(folder) == exported
    capsys.readouterr()
    status = run_script("generate_digits_images", ["--output_dir", str(folder), "--image_size", "16"], monkeypatch)
    err = capsys.readouterr().err
    assert status == USER_ERROR_STATUS and err.count("\n") == 1, err
    assert f"--output_dir {folder} holds an export of other settings (image_size: 8 -> 16" in err, err
    assert tree_digest(folder) == exported


EXPORTS = [  # (script, argv, the difficulty folder it writes into or "", other settings, their difference, marker)
    ("generate_listops", LISTOPS, "", ["--seed", "1"], "seed: 0 -> 1",
     {"export": "listops", "num_train": 4, "num_validation": 2, "num_test": 2, "seed": 0, "min_length": 5,
      "max_length": 60}),
    ("generate_pathfinder", PATHFINDER, "curv_contour_length_14", ["--num_images", "6"], "num_images: 4 -> 6",
     {"export": "pathfinder", "num_images": 4, "image_size": 32, "contour_length": 14, "seed": 0}),
]


@pytest.mark.parametrize("name, argv, difficulty, other, changed, marker", EXPORTS, ids=[e[0] for e in EXPORTS])
def test_a_generator_completes_its_own_export_and_refuses_other_settings(name, argv, difficulty, other, changed, marker,
                                                                         tmp_path, monkeypatch, capsys):
    """A new folder gets the files and the marker; the same command again writes the same bytes; other settings
    into it are refused in one line, the export unchanged."""
    output = tmp_path / "out"
    assert run_script(name, ["--output_dir", str(output), *argv], monkeypatch) == 0
    folder = output / difficulty
    assert json.loads((folder / EXPORT_MARKER_NAME).read_text()) == marker
    exported = tree_digest(output)
    assert run_script(name, ["--output_dir", str(output), *argv], monkeypatch) == 0
    assert tree_digest(output) == exported
    capsys.readouterr()
    status = run_script(name, ["--output_dir", str(output), *argv, *other], monkeypatch)
    err = capsys.readouterr().err
    assert status == USER_ERROR_STATUS and err.count("\n") == 1, err
    assert f"{folder} holds an export of other settings ({changed}" in err, err
    assert tree_digest(output) == exported


def test_one_folder_holds_several_pathfinder_difficulties(tmp_path, monkeypatch):
    """Each contour length has its own folder under --output_dir, as in the release (curv_contour_length_9 beside
    curv_contour_length_14), so a second difficulty is written beside the first, which stays as it was."""
    output = tmp_path / "pathfinder32"
    assert run_script("generate_pathfinder", ["--output_dir", str(output), *PATHFINDER], monkeypatch) == 0
    first = tree_digest(output / "curv_contour_length_14")
    assert run_script("generate_pathfinder", ["--output_dir", str(output), *PATHFINDER, "--contour_length", "9"],
                      monkeypatch) == 0
    assert tree_digest(output / "curv_contour_length_14") == first
    assert len(list((output / "curv_contour_length_9" / "imgs" / "0").glob("*.png"))) == 4


def test_the_pathfinder_figure_needs_its_file_named_and_keeps_a_users_file_of_the_default_name(tmp_path, monkeypatch,
                                                                                              capsys):
    """Issue 54: with no --output the command wrote docs/pathfinder_examples.png under whatever folder it ran in,
    replacing a user's file of that name; --output is now required, and the file it names is written."""
    monkeypatch.chdir(write_user_files(tmp_path))
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "pathfinder_examples.png").write_bytes(b"the user's own figure")
    before = tree_digest(tmp_path)
    assert run_script("pathfinder_examples", [], monkeypatch) == USER_ERROR_STATUS
    assert "--output" in capsys.readouterr().err and tree_digest(tmp_path) == before
    assert run_script("pathfinder_examples", ["--output", "figures/examples.png"], monkeypatch) == 0
    assert (tmp_path / "figures" / "examples.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "docs" / "pathfinder_examples.png").read_bytes() == b"the user's own figure"


@pytest.mark.parametrize("output", ["", "{file}", "{file}/report", "{read_only}", READ_ONLY, "{dangling}",
                                    "{dangling}/report", "{long}", "{report_taken}", "{log_taken}"])
def test_the_gpu_self_check_refuses_its_output_folder_before_anything_runs(output, tmp_path, read_only, monkeypatch,
                                                                          capsys):
    """Issue 54: benchmarks/gpu_self_check.py wrote into the current folder for an empty --output_dir and raised a
    traceback for a file or a read-only folder; issue 66: and for a symbolic link to nothing, a name too long, or a
    folder where its report or log goes; now one line, exit status 2, nothing written, no step run."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import gpu_self_check

    def no_step(*args):
        raise AssertionError("a step was planned for a refused --output_dir")

    monkeypatch.setattr(gpu_self_check, "plan", no_step)
    monkeypatch.chdir(write_user_files(tmp_path / "user"))
    places = {"file": tmp_path / "user" / "notes.txt", "read_only": read_only, **awkward_places(tmp_path)}
    for name, file in (("report_taken", gpu_self_check.REPORT_NAME), ("log_taken", gpu_self_check.LOG_NAME)):
        places[name] = tmp_path / name
        (places[name] / file).mkdir(parents=True)  # a folder where the check writes its file
    before = tree_digest(tmp_path)
    with pytest.raises(SystemExit) as stop:
        gpu_self_check.main(gpu_self_check.parse_arguments(["--dry_run", "--output_dir", output.format(**places)]))
    err = capsys.readouterr().err
    assert stop.value.code == USER_ERROR_STATUS and err.startswith("error: --output_dir") and err.count("\n") == 1, err
    assert tree_digest(tmp_path) == before


GENERATORS = [("generate_listops", LISTOPS, "", {"export": "listops", "seed": 7}),
              ("generate_pathfinder", PATHFINDER, "curv_contour_length_14", {"export": "pathfinder", "image_size": 0})]


@pytest.mark.parametrize("name, argv, difficulty, recorded", GENERATORS, ids=[g[0] for g in GENERATORS])
def test_a_marker_alone_is_no_export_and_the_corrected_command_writes(name, argv, difficulty, recorded, tmp_path,
                                                                      monkeypatch):
    """Issue 54: a generator that stopped after recording its marker and before its first file (as e3e75e2's did on
    --image_size 0) left a folder that refused the corrected command as "an export of other settings"; a marker
    with no file beside it now counts as no export."""
    output = tmp_path / "out"
    (output / difficulty).mkdir(parents=True)
    (output / difficulty / EXPORT_MARKER_NAME).write_text(json.dumps(recorded))
    assert run_script(name, ["--output_dir", str(output), *argv], monkeypatch) == 0
    assert json.loads((output / difficulty / EXPORT_MARKER_NAME).read_text())["seed"] == 0


def test_generated_pictures_are_written_whole_through_the_atomic_writer(tmp_path, monkeypatch):
    """Issue 54: every PNG of the digits exporter and the Pathfinder generator becomes its file by `os.replace` of
    a temporary (`hf_spt.atomic_files`), so a kill never leaves half a picture under its final name."""
    from hf_spt.tasks.digits import write_digits_image_folder
    from hf_spt.tasks.pathfinder_generator import write_pathfinder

    replaced = set()
    real_replace = os.replace

    def recording_replace(source, target, *args, **kwargs):
        replaced.add(Path(target))
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", recording_replace)
    write_pathfinder(tmp_path / "pathfinder", 4)
    write_digits_image_folder(tmp_path / "digits", 8)
    pictures = set(tmp_path.rglob("*.png"))
    assert len(pictures) == 4 + 1797 and pictures <= replaced


def test_an_export_syncs_to_disk_once_not_once_a_picture(tmp_path, monkeypatch):
    """Issue 66: `write_png` synced every picture (1,000 32x32 PNGs 3.6 s instead of 0.13 s); an export now syncs
    once at its end (`atomic_files.sync_all`), and only its text files are synced one by one."""
    from hf_spt.tasks.digits import write_digits_image_folder
    from hf_spt.tasks.pathfinder_generator import write_pathfinder

    calls = {"fsync": 0, "sync": 0}
    monkeypatch.setattr(os, "fsync", lambda descriptor: calls.__setitem__("fsync", calls["fsync"] + 1))
    monkeypatch.setattr(os, "sync", lambda: calls.__setitem__("sync", calls["sync"] + 1))
    write_digits_image_folder(tmp_path / "digits", 8)
    assert calls == {"fsync": 0, "sync": 1}
    write_pathfinder(tmp_path / "pathfinder", 4)
    assert calls == {"fsync": 1, "sync": 2}  # the one metadata file, then the export
