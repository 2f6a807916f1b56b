"""Suites of runs and their reports, built on the experiments layer's single runs: the ablation grid (`grid`,
`ablation`, `grid_report`), the Long Range Arena suite (`lra`, `lra_report`), the budget study (`budget_study`,
`budget_report`, shipped studies under `studies/`) and the analysis of a finished suite (`analysis_run`). Nothing
in the rest of `hf_spt.experiments` imports from here."""
