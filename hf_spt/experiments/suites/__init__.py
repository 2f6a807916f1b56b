"""Suites of runs and their reports, built on the experiments layer's single runs. Shared by every suite: what a grid
is (`grid`), the grid runner (`grid_runner`) and the reports and helpers they share (`grid_report`, `seed_tables`,
`run_records`). The suites: the Long Range Arena suite (`lra`, `lra_report`), the budget study (`budget_study`,
`budget_report`, shipped studies under `studies/`), accuracy against compute (`compute_report`) and the analysis of
a finished suite (`analysis_run`); none imports another's modules. Nothing in the rest of `hf_spt.experiments`
imports from here."""
