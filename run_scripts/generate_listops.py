"""`hf_spt.scripts.generate_listops` run from a checkout (its docstring has the usage; `--help` lists the flags)."""

from hf_spt.scripts.generate_listops import main

if __name__ == "__main__":
    main()
