"""Write Pathfinder-style images in the LRA release layout.

    python run_scripts/generate_pathfinder.py --help
"""

from hf_spt.tasks.pathfinder_generator import main

if __name__ == "__main__":
    main()
