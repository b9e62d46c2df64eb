"""`python -m bench` (or `make bench`): mlfuse-bench, from the repository checkout.

bench/ is not part of the installed package, so there is no installed mlfuse-bench
command; the driver is mlfuse.tools.mlfuse_bench (see `python -m bench --help`).
"""

import sys

from mlfuse.tools.mlfuse_bench import main

sys.exit(main())
