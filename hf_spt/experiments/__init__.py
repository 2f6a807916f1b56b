"""Layer 5, experiments: what builds a run and runs it (command-line arguments, recipes, `--mode`s as data, the
two-phase pipeline, model-card provenance), and in `suites/` the ablation grid, the LRA suite and the budget study,
which hand their results to their reports (`hf_spt.reports`, a layer below). The only layer that knows the command-line dataclasses; run scripts import from here."""
