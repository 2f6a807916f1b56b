"""Layer 6, the commands: one module per job, each with its `main()` (the command line, ending as
`experiments.exit_status.run_cli` says) and `run(...)` (the job on parsed arguments, which tests call).

Each is reached three ways with the same flags: `hf-spt <command>` (`hf_spt.cli`, installed with the package),
`python -m hf_spt.scripts.<module>` (and `accelerate launch -m hf_spt.scripts.<module>`), and, in a checkout,
`run_scripts/<module>.py`, a wrapper that calls `main()`. The data a command reads ships here too
(`ablation_default.yaml`, the ablation's default grid).
"""
