"""`hf_spt.scripts.run_analysis` run from a checkout (its docstring has the usage; `--help` lists the flags)."""

from hf_spt.scripts.run_analysis import main

if __name__ == "__main__":
    main()
