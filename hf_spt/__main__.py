"""`python -m hf_spt <command> [flags]`: the `hf-spt` console script (`hf_spt.cli`), for an environment whose
scripts folder is not on PATH."""

from hf_spt.cli import main

if __name__ == "__main__":
    main()
