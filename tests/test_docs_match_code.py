"""The docs name only what exists: module paths, repository paths and script flags.

README.md and docs/*.md are read as a user would copy from them:
- every dotted `hf_spt.xxx[.yyy]` name (code, code blocks or prose) resolves: an importable module,
  or an attribute reached from the longest importable module prefix; `from hf_spt.x import a, b`
  in a code block resolves `a` and `b` too;
- every repository path under `hf_spt/`, `run_scripts/`, `benchmarks/` or `tests/` exists;
- every `--flag` given to a repository script (`run_scripts/*.py`, `benchmarks/*.py`, or a script's command:
  `hf-spt run`, `python -m hf_spt.scripts.run_spt`) is one its parser accepts. A flag belongs to the script
  named before it in the same command: a shell line of
  a fenced block (with its `\\` continuations, comments dropped) or one inline code span. Flags
  before the script name (`accelerate launch --multi_gpu ...`) and commands of other programs
  (pip, pytest, accelerate alone) are not the package's. A flag mentioned outside such a command
  belongs to the script a section's heading names, in docs/running.md (run_spt.py's flag
  reference) to run_spt.py, and elsewhere must at least be accepted by some repository script;
- every relative link `[text](target)` outside code names a file that exists and, where it names a heading
  (`page.md#anchor`, `#anchor`), a heading of that Markdown page, by the anchor GitHub renders for it.

The parsers are read, not guessed: one subprocess runs each script with `--help` as `__main__`,
stops it when its parser is about to parse, and reports that parser's option strings.
"""

from __future__ import annotations

import argparse
import importlib
import json
import re
import runpy
import subprocess
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SCRIPTS = {path.stem: path for folder in ("run_scripts", "benchmarks") for path in sorted((ROOT / folder).glob("*.py"))
           if path.stem != "benchmarking"}  # the benchmarks' shared parts; its __main__ is their child process
DOC_DEFAULT_SCRIPT = {"running.md": "run_spt"}  # the doc that is a script's flag reference
FOREIGN_COMMANDS = {"pip", "pytest", "accelerate", "hf", "huggingface-cli", "git", "kill", "cd", "export", "nice"}
SHELL_FENCES = {"", "bash", "sh", "shell", "console"}

DOTTED_NAME = re.compile(r"(?<![\w./-])hf_spt(?:\.[A-Za-z_]\w*)+")
FROM_IMPORT = re.compile(r"^\s*from\s+(hf_spt(?:\.\w+)*)\s+import\s+([\w\s,]+)")
# a folder (trailing /), a file (an extension) or a glob; "hf_spt/BERT", a ratio, is none
REPO_PATH = re.compile(r"(?<![\w./-])((?:hf_spt|run_scripts|benchmarks|tests)/(?:[\w./*-]*\.\w+|[\w./-]*\*[\w./*-]*|[\w./*-]*/))")
FLAG = re.compile(r"(?<![\w-])--([A-Za-z][\w-]*)")
SCRIPT_NAME = re.compile(r"(?<![\w.-])(?:[\w.-]*/)*(" + "|".join(map(re.escape, SCRIPTS)) + r")\.py\b")
SCRIPT_MODULE = re.compile(r"(?<![\w.-])hf_spt\.scripts\.(" + "|".join(map(re.escape, SCRIPTS)) + r")\b")
OTHER_SCRIPT = re.compile(r"(?<![\w.-])[\w./-]*\w\.py\s+--")  # a script (not ours: checked after SCRIPT_NAME) given flags
CODE_SPAN = re.compile(r"`([^`]+)`")
FENCE = re.compile(r"^\s*(```|~~~)\s*(\w*)")
ENV_ASSIGNMENT = re.compile(r"^\w+=\S*$")
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Mention:
    """A name a doc uses, where it uses it, and (for a flag) the script it must belong to."""

    doc: str
    line: int
    name: str
    script: str | None = None  # a flag's script; None: any repository script


# ---- collecting the scripts' flags (run in a subprocess: `python tests/test_docs_match_code.py`)

class _Parsed(Exception):
    """Raised in place of parsing, once a script's full parser (the one with --help) is known."""


def _option_strings(script: Path) -> list[str]:
    """The `--` options of the parser `script` builds when run as `__main__` (stopped before parsing)."""
    found: list[str] = []
    original = argparse.ArgumentParser.parse_known_args

    def capture(parser: argparse.ArgumentParser, args=None, namespace=None):  # noqa: ANN001, ANN202
        found.extend(option for option in parser._option_string_actions if option.startswith("--"))
        if "--help" in parser._option_string_actions:
            raise _Parsed
        return original(parser, args, namespace)

    import hf_spt.experiments.exit_status as exit_status  # scripts ending through run_cli also take its --debug

    def run_cli(main, argv=None):  # noqa: ANN001, ANN202
        found.append(exit_status.DEBUG_FLAG)
        return original_run_cli(main, argv)

    original_run_cli = exit_status.run_cli
    argparse.ArgumentParser.parse_known_args, exit_status.run_cli = capture, run_cli
    sys.argv = [str(script), "--help"]
    sys.path.insert(0, str(script.parent))  # as `python script.py` has it: benchmarks import their neighbours
    try:
        runpy.run_path(str(script), run_name="__main__")
    except _Parsed:
        return sorted(set(found))
    except SystemExit:
        pass
    finally:
        argparse.ArgumentParser.parse_known_args, exit_status.run_cli = original, original_run_cli
        sys.path.remove(str(script.parent))
    return []  # no parser reached: the script takes no flags


@cache
def script_flags() -> dict[str, set[str]]:
    """Each repository script's accepted `--flags`, from one subprocess that builds every parser."""
    done = subprocess.run([sys.executable, __file__, *map(str, SCRIPTS.values())], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"collecting the scripts' flags failed:\n{done.stderr[-3000:]}"
    return {name: set(flags) for name, flags in json.loads(done.stdout.splitlines()[-1]).items()}


# ---- reading the docs

@cache
def commands() -> tuple[re.Pattern, dict[str, str]]:
    """`hf-spt COMMAND` as a pattern, and each command's script (imported here, not in the flag-collecting
    subprocess, which imports the worktree's hf_spt only after this module's imports)."""
    from hf_spt.cli import COMMANDS

    return re.compile(r"(?<![\w.-])hf-spt\s+(" + "|".join(map(re.escape, COMMANDS)) + r")(?![\w-])"), COMMANDS


def _heading_script(line: str) -> str | None:
    match = SCRIPT_NAME.search(line) if line.lstrip().startswith("#") else None
    return match.group(1) if match else None


def _command_flags(doc: str, text: str, first_line: int, default: str | None) -> list[Mention]:
    """The flags of one command (a shell line or an inline code span), each with its script.

    After a script's name, flags are that script's; before it (a launcher's) or in another program's
    command they are skipped; with no script named they get `default`."""
    mentions: list[Mention] = []
    bounds = [0, *(end for sep in re.finditer(r"&&|\|\||;|\|", text) for end in (sep.start(), sep.end())), len(text)]
    for begin, end in zip(bounds[::2], bounds[1::2]):
        part = text[begin:end]
        words = [word for word in part.split() if not ENV_ASSIGNMENT.match(word)]
        command, command_scripts = commands()
        scripts = sorted([(m.start(), m.group(1)) for name in (SCRIPT_NAME, SCRIPT_MODULE) for m in name.finditer(part)]
                         + [(m.start(), command_scripts[m.group(1)]) for m in command.finditer(part)])
        if not scripts and words and (words[0] in FOREIGN_COMMANDS or words[:2] == ["python", "-m"]
                                      or OTHER_SCRIPT.search(part)):
            continue  # another program's command, e.g. transformers' run_classification.py
        for flag in FLAG.finditer(part):
            owner = [script for start, script in scripts if start < flag.start()]
            if scripts and not owner:
                continue  # the launcher's flag, before the script name
            line = first_line + text[:begin + flag.start()].count("\n")
            mentions.append(Mention(doc, line, f"--{flag.group(1).rstrip('-')}", owner[-1] if owner else default))
    return mentions


def _logical_lines(lines: list[tuple[int, str]], shell: bool) -> list[tuple[int, str]]:
    """Logical lines (first line number, text): `\\` continuations joined; in a shell block, comments dropped."""
    commands, current, start = [], "", 0
    for number, line in lines:
        if shell:
            line = re.sub(r"(^|\s)#.*$", "", line)
        if not current:
            start = number
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + "\n"
            continue
        commands.append((start, current + line))
        current = ""
    if current:
        commands.append((start, current))
    return commands


def read_doc(path: Path) -> list[Mention]:
    """Every dotted hf_spt name, repository path and script flag `path` names, with its line."""
    doc = str(path.relative_to(ROOT))
    lines = path.read_text(encoding="utf-8").splitlines()
    mentions: list[Mention] = []
    for number, line in enumerate(lines, 1):
        mentions += [Mention(doc, number, m.group(0)) for m in DOTTED_NAME.finditer(line)]
        mentions += [Mention(doc, number, m.group(1).rstrip(".")) for m in REPO_PATH.finditer(line)]
        if match := FROM_IMPORT.match(line):
            names = [name.split()[0] for name in match.group(2).split(",") if name.strip()]
            mentions += [Mention(doc, number, f"{match.group(1)}.{name}") for name in names]

    doc_default = DOC_DEFAULT_SCRIPT.get(path.name)
    section_default, fence, fence_lines, paragraph = doc_default, None, [], []

    def flush_paragraph() -> None:
        """Code spans (which may cross a line break) and then the rest of the paragraph's text."""
        if not paragraph:
            return
        text, first = "\n".join(line for _, line in paragraph), paragraph[0][0]
        for span in CODE_SPAN.finditer(text):
            mentions.extend(_command_flags(doc, span.group(1), first + text[:span.start()].count("\n"),
                                           section_default))
        rest = CODE_SPAN.sub(lambda span: re.sub(r"[^\n]", " ", span.group(0)), text)
        numbered = [(first + offset, line) for offset, line in enumerate(rest.split("\n"))]
        for start, line in _logical_lines(numbered, shell=False):  # an indented command may continue
            mentions.extend(_command_flags(doc, line, start, section_default))
        paragraph.clear()

    for number, line in enumerate(lines, 1):
        if fence is not None:
            if FENCE.match(line):
                if fence in SHELL_FENCES:
                    for start, command in _logical_lines(fence_lines, shell=True):
                        mentions.extend(_command_flags(doc, command, start, section_default))
                fence, fence_lines = None, []
            else:
                fence_lines.append((number, line))
        elif match := FENCE.match(line):
            flush_paragraph()
            fence = match.group(2)
        elif not line.strip() or line.lstrip().startswith("#"):
            flush_paragraph()
            if line.lstrip().startswith("#"):
                section_default = _heading_script(line) or doc_default
        else:
            paragraph.append((number, line))
    flush_paragraph()
    return mentions



def _outside_code(path: Path) -> list[tuple[int, str]]:
    """A Markdown page's numbered lines outside fenced code blocks."""
    kept, fence = [], False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if FENCE.match(line):
            fence = not fence
        elif not fence:
            kept.append((number, line))
    return kept


@cache
def anchors(path: Path) -> frozenset[str]:
    """The heading anchors GitHub renders for a Markdown page: the heading lower-cased, punctuation (backticks,
    colons, commas, apostrophes, dots, parentheses) dropped, spaces made hyphens; a repeated one numbered -1, -2."""
    slugs: set[str] = set()
    counts: dict[str, int] = {}
    for _, line in _outside_code(path):
        if match := HEADING.match(line):
            slug = re.sub(r"[^\w\- ]", "", match.group(1).lower()).replace(" ", "-")
            counts[slug] = counts.get(slug, -1) + 1
            slugs.add(f"{slug}-{counts[slug]}" if counts[slug] else slug)
    return frozenset(slugs)


@cache
def all_mentions() -> tuple[Mention, ...]:
    return tuple(mention for path in DOCS for mention in read_doc(path))


# ---- resolving

def resolves(dotted: str) -> bool:
    """Whether `dotted` is an importable module or an attribute of the longest importable prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            target = importlib.import_module(module_name)
        except ModuleNotFoundError as error:
            if error.name is None or not module_name.startswith(error.name):
                raise  # a real module whose own import failed
            continue
        for attribute in parts[cut:]:
            if not hasattr(target, attribute):
                return False
            target = getattr(target, attribute)
        return True
    return False


def test_docs_are_read() -> None:
    """The reader finds what it is meant to check (a reader that finds nothing passes vacuously)."""
    mentions = all_mentions()
    assert any(m.name.startswith("hf_spt.") for m in mentions)
    assert any(m.name == "--pretrain_epochs" and m.script == "run_spt" for m in mentions)
    assert not any(m.name in ("--multi_gpu", "--num_processes") for m in mentions)  # accelerate's own
    assert {"run_spt", "run_lra", "run_ablation", "run_budget_study", "run_analysis"} <= {
        m.script for m in mentions if m.script}
    for command, script in (("accelerate launch --multi_gpu -m hf_spt.scripts.run_lra --scale mini", "run_lra"),
                            ("hf-spt budget-study --study x", "run_budget_study")):  # a command names its script
        assert [m.script for m in _command_flags("doc", command, 1, None)] == [script]


def test_module_names_resolve() -> None:
    missing = [f"{m.doc}:{m.line}: {m.name} does not resolve (no such module or attribute)"
               for m in all_mentions() if m.name.startswith("hf_spt.") and not resolves(m.name)]
    assert not missing, "\n".join(missing)


def test_repository_paths_exist() -> None:
    missing = [f"{m.doc}:{m.line}: {m.name} does not exist" for m in all_mentions()
               if "/" in m.name and not m.name.startswith("--") and not any(ROOT.glob(m.name.rstrip("/")))]
    assert not missing, "\n".join(missing)


def test_script_flags_exist() -> None:
    accepted = script_flags()
    everywhere = set().union(*accepted.values())
    wrong = []
    for m in all_mentions():
        if not m.name.startswith("--"):
            continue
        if m.script is None and m.name not in everywhere:
            wrong.append(f"{m.doc}:{m.line}: {m.name} is a flag of no repository script")
        elif m.script is not None and m.name not in accepted[m.script]:
            wrong.append(f"{m.doc}:{m.line}: {m.name} is not a flag of {SCRIPTS[m.script].relative_to(ROOT)}")
    assert not wrong, "\n".join(wrong)


def test_links_resolve() -> None:
    """A relative link outside code names a file of the checkout and, with `#anchor`, a heading of that page."""
    links = []
    for path in DOCS:
        for number, line in _outside_code(path):
            text = CODE_SPAN.sub(lambda span: " " * len(span.group(0)), line)
            links += [(path, number, match.group(1)) for match in MARKDOWN_LINK.finditer(text)
                      if not re.match(r"[a-z][\w+.-]*:", match.group(1))]  # https:, mailto: are not the checkout's
    broken = []
    for path, number, target in links:
        name, _, anchor = target.partition("#")
        page = (path.parent / name).resolve() if name else path
        if not page.exists():
            broken.append(f"{path.relative_to(ROOT)}:{number}: {target}: no such file")
        elif anchor and page.suffix == ".md" and anchor not in anchors(page):
            broken.append(f"{path.relative_to(ROOT)}:{number}: {target}: no heading with that anchor")
    assert len(links) > 50 and any("#" in target for _, _, target in links)
    assert not broken, "\n".join(broken)

def test_flag_reference_lists_every_mode_and_recipe() -> None:
    """docs/running.md's `--mode a|b|...` and `--recipe a|b` rows name exactly the values the code takes (an
    upper-case placeholder such as FILE stands for a user's value)."""
    from hf_spt.experiments.modes import MODES
    from hf_spt.experiments.recipes import RECIPES

    lines = (ROOT / "docs" / "running.md").read_text(encoding="utf-8").splitlines()
    for flag, values in (("--mode", tuple(MODES)), ("--recipe", RECIPES)):
        rows = [(number, [v for v in match.group(1).split("\\|") if not v.isupper()])
                for number, line in enumerate(lines, 1)
                if (match := re.search(rf"`{flag} (\w+(?:\\\|\w+)+)`", line))]  # a choice list
        assert rows, f"docs/running.md: no `{flag} a\\|b` row in the flag reference"
        for number, listed in rows:
            assert sorted(listed) == sorted(values), (
                f"docs/running.md:{number}: `{flag}` lists {', '.join(listed)}; the code takes {', '.join(values)}")


def test_the_ci_runs_the_readme_test_command() -> None:
    """README's set-up says `.ci/run` ends with its test command: the two stay one command (workers included)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    commands = re.findall(r'^pip install -e "\.\[test\]" && (.+)$', readme, flags=re.MULTILINE)
    assert len(commands) == 1, "README's set-up: one `pip install -e \".[test]\" && ...` line"
    ci_lines = [line for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
                if line.strip() and not line.startswith("#")]
    assert ci_lines[-1] == commands[0], f".ci/run ends with {ci_lines[-1]!r}; README's test command is {commands[0]!r}"


if __name__ == "__main__":  # the subprocess of `script_flags`: one JSON line {script: [flags]}
    sys.path[0] = str(ROOT)  # the worktree's hf_spt, not this file's folder
    flags = {Path(arg).stem: _option_strings(Path(arg)) for arg in sys.argv[1:]}
    print(json.dumps(flags))
