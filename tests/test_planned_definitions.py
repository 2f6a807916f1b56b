"""The planning code plans what it planned when the record was made: every phase definition (and the Trainer
arguments a definition leaves out) of the shipped commands, recipes, grids, studies and the LRA suite, as
`tests/phase_definitions.py` lists them on stand-in data, equals `tests/fixtures/phase_definitions.json`."""

import json

import datasets
import pytest
import transformers

from phase_definitions import RECORD, differences, list_definitions


def test_every_planned_phase_is_defined_as_recorded():
    recorded = json.loads(RECORD.read_text())
    versions = {"transformers": transformers.__version__, "datasets": datasets.__version__}
    if recorded["versions"] != versions:
        pytest.skip(f"the record was made under {recorded['versions']}, this is {versions}: definitions hold every "
                    "TrainingArguments field; record it again (python tests/phase_definitions.py --write) on main")
    assert differences(recorded, list_definitions()) == []


def test_a_changed_plan_is_named():
    recorded = json.loads(RECORD.read_text())
    changed = json.loads(json.dumps(recorded))
    changed["run_spt: default"]["scratch"]["definition"]["seed"] = 99
    del changed["run_spt: mode spt"]
    assert differences(recorded, changed) == ["run_spt: default / scratch: ['definition']", "run_spt: mode spt: gone"]
