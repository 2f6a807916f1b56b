"""Layer 5, experiments: what builds a run and runs it: the command line (argument groups, parser, settings files,
recipes), the run's settings resolved once into typed values (`run_spec`), `--mode`s as data, the two-phase
pipeline that plans each phase and runs it as planned, and in `suites/` the ablation grid, the LRA suite and the
budget study, which hand their results to their reports (`hf_spt.reports`, a layer below). The only layer that
knows the command-line dataclasses, and within it only the parser and `run_spec.resolve_run` read them; the
commands import from here."""
