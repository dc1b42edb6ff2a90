"""`python -m kernels_harness ...`: see kernels_harness/cli.py."""
import sys

from kernels_harness.cli import main

sys.exit(main())
