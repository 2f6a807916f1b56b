"""Write ListOps TSVs (basic_{train,val,test}.tsv) as LRA released them.

    python run_scripts/generate_listops.py --help
"""

from hf_spt.tasks.listops_generator import main

if __name__ == "__main__":
    main()
