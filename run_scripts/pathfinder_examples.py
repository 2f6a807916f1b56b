"""`hf_spt.scripts.pathfinder_examples` run from a checkout (its docstring has the usage; `--help` lists the flags)."""

from hf_spt.scripts.pathfinder_examples import main

if __name__ == "__main__":
    main()
