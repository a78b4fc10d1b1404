"""`python3 -m gpucheck ARGS`: scripts/gpu-check.sh's program (see gpucheck.cli)."""
import sys

from gpucheck.cli import main

sys.exit(main(sys.argv[1:]))
