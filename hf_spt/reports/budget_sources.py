"""One budget study report from several finished ones (`run_budget_study.py --combine`).

Reads each folder's `budget_study.json` rows and `budget_study_checkpoints.json` probes and joins them by
configuration (`report_sources.join_by_config`): the same study re-run with more seeds, a configuration re-run under
newer code (`replaced`), or other seeds of one study run into another folder (`added`, refused where the seeds were
made with other CPU numerics unless the caller allows the mix). The joined rows go to
`budget_report.write_study_report` like a single study's, with the attention rows joined the same way
(`combined_attention`).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from pathlib import Path
from typing import Any

from ..errors import UserInputError
from ..runs.folder import read_json
from ..runs.provenance import PROVENANCE_KEYS
from .attention_report import ATTENTION_JSON_NAME
from .budget_report import CHECKPOINTS_JSON_NAME, STUDY_JSON_NAME
from .report_sources import join_by_config, numerics_mixes, numerics_text


def combined_reports(folders: list[str | Path], replaced: Collection[str] = (), added: Collection[str] = (),
                     mix_numerics: bool = False) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The rows and checkpoint probes of several finished studies' reports, for one report over all their
    configurations; a configuration's rows and probes come from one folder (`report_sources.join_by_config`; a
    configuration in `replaced` from the last folder that holds it, one in `added` from every folder, as other
    seeds of one study, refused where its seeds were made with other CPU numerics unless `mix_numerics`)."""
    sources = []
    for folder in map(Path, folders):
        study = read_json(folder / STUDY_JSON_NAME)
        probes = read_json(folder / CHECKPOINTS_JSON_NAME)
        if not isinstance(study, list) or not isinstance(probes, list):
            raise UserInputError(f"{folder} holds no finished budget study report ({STUDY_JSON_NAME} and "
                                 f"{CHECKPOINTS_JSON_NAME} as lists): give the output folder of a run_budget_study.py run.")
        sources.append((folder, [("row", row) for row in study] + [("probe", probe) for probe in probes]))
    held = {entry[1]["config"] for _, entries in sources for entry in entries}
    for flag, named in (("--replace_configs", replaced), ("--add_seeds", added)):
        unknown = [config for config in named if config not in held]
        if unknown:
            raise UserInputError(f"{flag} {','.join(unknown)}: no folder holds such a configuration (they hold "
                                 f"{', '.join(sorted(held))}).")
    joined = join_by_config(sources, lambda entry: entry[1]["config"], lambda entry: entry[1]["seed"],
                            _report_settings, replaced, added)
    rows = [row for kind, row in joined if kind == "row"]
    mixed = {config: labels for config, labels in numerics_mixes(rows, "config").items() if config in added}
    if mixed and not mix_numerics:
        raise UserInputError("; ".join(f"--add_seeds {config}: its seeds were made with other CPU numerics, "
                                       f"{numerics_text(labels)}" for config, labels in mixed.items())
                             + ": run the added seeds with the same numerics (--portable_numerics, or without), or "
                             "give --mix_numerics to join them anyway (the report then says the configuration mixes "
                             "them).")
    return rows, [probe for kind, probe in joined if kind == "probe"]


def combined_attention(folders: list[str | Path], replaced: Collection[str] = (),
                       added: Collection[str] = ()) -> list[dict[str, Any]]:
    """The attention rows (`attention_report.ATTENTION_JSON_NAME`) of several finished studies, joined by
    configuration as `combined_reports` joins their rows; a folder written before studies probed attention adds
    none."""
    sources = [(folder, read_json(folder / ATTENTION_JSON_NAME) or []) for folder in map(Path, folders)]
    return join_by_config(sources, lambda row: row["config"], lambda row: row["seed"],
                          lambda row: json.dumps({k: v for k, v in row.items() if k not in _MEASURED}, sort_keys=True),
                          replaced, added)


# What a row or probe measured (or which seed it is, or which code ran it): the rest is what its study set, the
# same for every seed.
# The study a row names and the digest of the definition it ran under are its provenance too: the declaration check
# (`preregistration.declaration_line`) names a joined seed that ran under another definition.
_MEASURED = {"seed", "test_accuracy", "eval_accuracy", "seconds", "best_eval_loss", "mlm_loss", "unigram_loss",
             "near_ratio_by_layer", "profile_by_layer", "study", "study_definition", *PROVENANCE_KEYS}


def _report_settings(entry: tuple[str, dict[str, Any]]) -> str:
    kind, values = entry
    return json.dumps([kind, {key: value for key, value in values.items() if key not in _MEASURED}], sort_keys=True)


__all__ = ["combined_reports", "combined_attention"]
