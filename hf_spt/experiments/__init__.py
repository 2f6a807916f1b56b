"""Layer 4, experiments: command-line arguments, the two-phase pipeline, the ablation grid,
recipes, model-card provenance and Hub checks. The only layer that knows the command-line
dataclasses; run scripts import from here."""
