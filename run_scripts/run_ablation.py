"""`hf_spt.scripts.run_ablation` run from a checkout (its docstring has the usage; `--help` lists the flags)."""

from hf_spt.scripts.run_ablation import main

if __name__ == "__main__":
    main()
