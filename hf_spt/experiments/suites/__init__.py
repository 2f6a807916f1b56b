"""Suites of runs, built on the experiments layer's single runs. Shared by every suite: what a grid is (`grid`), the
grid runner (`grid_runner`) and reading a finished run's record (`finished_runs`). The suites: the Long Range Arena
suite (`lra`), the budget study (`budget_study`, shipped studies under `studies/`), accuracy against compute
(`compute_curves`: each finished run's curve) and the analysis of a finished suite (`analysis_run`); none imports
another's modules. Their reports (tables, figures, paired statistics) are `hf_spt.reports`', which the suites hand
their results to. Nothing in the rest of `hf_spt.experiments` imports from here."""
