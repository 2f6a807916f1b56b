"""The reports of finished suites, apart from running them: tables, figures and paired statistics drawn from rows,
curves and probes that come in as data (or from report files written before). Every report's shared parts: mean ±
std over seeds (`seed_tables`), SPT minus each control paired by seed with its 95% interval (`paired_seeds`), arms
in the docs' words and one colour per arm, a configuration by the title its study file gives it, passed in
(`arm_labels`), and one report joined from several sources (`report_sources`). The reports: every grid's results
table (`grid_report`), the Long Range Arena suite's (`lra_report`), the budget study's (`budget_report`; several
finished studies joined into one by `budget_sources`) and accuracy against compute (`compute_report`). Nothing here
imports `hf_spt.experiments` or the commands: the suites that run (`hf_spt.experiments.suites`) hand their results
to these."""
