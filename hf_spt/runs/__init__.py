"""Layer 4, runs: what a run folder holds, with no command line: phase definitions (`phase_definition`), the
commit and library versions every result records (`provenance`), the folder itself (lock, atomic files, resumable
checkpoints, the output-folder checks every writer shares: `folder`), training a phase so that it resumes
(`resume`), whether phase folders are one run's (`one_run`), an exporter's folder (`export_folder`) and Hub checks
(`hub`)."""
