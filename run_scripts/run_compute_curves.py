"""`hf_spt.scripts.run_compute_curves` run from a checkout (its docstring has the usage; `--help` lists the flags)."""

from hf_spt.scripts.run_compute_curves import main

if __name__ == "__main__":
    main()
