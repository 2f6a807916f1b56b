"""What a budget study's rows say: each configuration's means over seeds, and SPT's gains paired by seed.

`summarize_study` gives each configuration's scratch, controls and budgets (test accuracy's mean, std and n over
seeds); `paired_comparisons` every arm with pretrained weights minus each control of the same depth, paired by
seed (`paired_seeds`); `pooled_comparisons` SPT minus plain and compute-matched scratch pooled over a scope's
configurations with the seed as the unit; `study_evidence` both, as the study's report shows them
(`budget_report`). Rows are `experiments.suites.budget_study.study_rows`'s.
"""

from __future__ import annotations

from typing import Any

from .paired_seeds import paired_difference, seed_pool
from .seed_tables import mean_std


def summarize_study(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """{config: {"scratch": stats, "controls": {arm: stats}, "budgets": [{budget_tokens, pretrain_epochs, arm
    kind: stats..., "gain_vs_scratch", "gain_vs_compute_matched"}]}}, test accuracy's mean, std and n over seeds;
    a gain is the difference of seed means."""
    summary: dict[str, dict[str, Any]] = {}
    for config in dict.fromkeys(row["config"] for row in rows):
        mine = [row for row in rows if row["config"] == config and row["test_accuracy"] is not None]
        groups: dict[tuple[str, int], list[float]] = {}
        for row in mine:
            groups.setdefault((row["arm"], row["budget_tokens"]), []).append(float(row["test_accuracy"]))
        stats = {key: mean_std(values) for key, values in groups.items()}
        scratch = stats.get(("scratch", 0))
        budgets = []
        for tokens in sorted({t for (arm, t) in stats if t and arm in ("spt", "scratch_compute_matched")}):
            entry: dict[str, Any] = {"budget_tokens": tokens, "pretrain_epochs": next(
                row["pretrain_epochs"] for row in mine if row["budget_tokens"] == tokens)}
            entry.update({arm: s for (arm, t), s in stats.items() if t == tokens})
            spt, matched = entry.get("spt"), entry.get("scratch_compute_matched")
            entry["gain_vs_scratch"] = spt["mean"] - scratch["mean"] if spt and scratch else None
            entry["gain_vs_compute_matched"] = spt["mean"] - matched["mean"] if spt and matched else None
            budgets.append(entry)
        controls = {arm: s for (arm, t), s in stats.items() if not t and arm != "scratch"}
        summary[config] = {"scratch": scratch, "controls": controls, "budgets": budgets}
    return summary


def _control_rank(row: dict[str, Any], budget_tokens: int) -> int | None:
    """Where `row`'s arm comes among the controls of an SPT arm of `budget_tokens`: 0 plain scratch (no budget, no
    model change), 1 the compute-matched scratch of that budget, 2 any other arm without pretrained weights (ALiBi,
    rotary); None for an arm with pretrained weights or the compute-matched scratch of another budget."""
    if row["pretrain_tokens"] or row["budget_tokens"] not in (0, budget_tokens):
        return None
    if row["budget_tokens"]:
        return 1
    return 0 if row.get("model") is None else 2


def paired_comparisons(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The evidence for each SPT gain, paired by seed (`paired_seeds`): in each configuration, every arm with
    pretrained weights (SPT, and SPT's parts: hybrid init, frozen attention) minus each control of the same depth
    (plain scratch, the compute-matched scratch of its budget, then the other arms without pretraining), for every
    pair of arms with a seed in common: {"config", "arm", "pretrain_epochs", "budget_tokens", "num_layers",
    "control", "difference"} (test accuracy, 0-1), configurations in first-seen order, budgets ascending."""
    groups: dict[tuple[str, str, int, int], tuple[dict[str, Any], dict[int, float]]] = {}
    for row in rows:
        if row["test_accuracy"] is not None:
            key = (row["config"], row["arm"], row["budget_tokens"], row["num_layers"])
            groups.setdefault(key, (row, {}))[1][row["seed"]] = float(row["test_accuracy"])
    configs = list(dict.fromkeys(row["config"] for row in rows))
    comparisons = []
    for (config, arm, tokens, depth), (first, scores) in sorted(groups.items(),
                                                                 key=lambda item: (configs.index(item[0][0]), item[0][2])):
        if not first["pretrain_tokens"]:
            continue
        controls = [(rank, key[1], control) for key, (row, control) in groups.items()
                    if key[0] == config and key[3] == depth and (rank := _control_rank(row, tokens)) is not None]
        for _, control_arm, control in sorted(controls, key=lambda item: item[0]):
            difference = paired_difference(scores, control)
            if difference is not None:
                comparisons.append({"config": config, "arm": arm, "pretrain_epochs": first["pretrain_epochs"],
                                    "budget_tokens": tokens, "num_layers": depth, "control": control_arm,
                                    "difference": difference})
    return comparisons


POOLED_CONTROLS = ("scratch", "scratch_compute_matched")


def pooled_comparisons(comparisons: list[dict[str, Any]], scopes: dict[str, list[str]]) -> list[dict[str, Any]]:
    """SPT (arm kind `spt`) minus plain and compute-matched scratch pooled over a scope's configurations and budgets
    with the seed as the unit (`paired_seeds.seed_pool`: each seed's mean difference, then the interval over
    seeds), for each scope ({name: configurations}) where that pools more than one comparison over more than one
    seed: {"scope", "configs", "control", "comparisons", "difference"}."""
    found = []
    for scope, configs in scopes.items():
        for control in POOLED_CONTROLS:
            chosen = [c for c in comparisons if c["config"] in configs and c["arm"] == "spt" and c["control"] == control]
            difference = seed_pool([c["difference"] for c in chosen]) if len(chosen) > 1 else None
            if difference is not None and difference.n > 1:
                found.append({"scope": scope, "configs": list(dict.fromkeys(c["config"] for c in chosen)),
                              "control": control, "comparisons": len(chosen), "difference": difference})
    return found


def study_evidence(rows: list[dict[str, Any]], studies: dict[str, list[str]]) -> dict[str, list[dict[str, Any]]]:
    """{"paired": `paired_comparisons`, "pooled": `pooled_comparisons` over each configuration's budgets, then over
    each study's configurations ({study: configurations}; a study with fewer than two configurations in the rows
    is left out: its pooled rows would be its configuration's)}."""
    comparisons = paired_comparisons(rows)
    configs = list(dict.fromkeys(row["config"] for row in rows))
    return {"paired": comparisons,
            "pooled": pooled_comparisons(comparisons, {config: [config] for config in configs})
            + pooled_comparisons(comparisons, {study: held for study, names in studies.items()
                                               if len(held := [c for c in names if c in configs]) > 1})}


__all__ = ["summarize_study", "paired_comparisons", "POOLED_CONTROLS", "pooled_comparisons", "study_evidence"]
