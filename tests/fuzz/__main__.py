"""python -m tests.fuzz --cases 2000 --seed 1 [--jobs 2] [--timeout 60] [--out fuzz-failures]"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .harness import FAILURES, run_campaign


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    p.add_argument("--cases", type=int, default=200)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--jobs", type=int, default=2, help="children at a time")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per case before it counts as a hang")
    p.add_argument("--out", default="fuzz-failures", help="folder for the failing inputs")
    p.add_argument("--case", type=int, default=None, help="run only this case (with -v: its stderr)")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per case")
    args = p.parse_args()
    campaign = run_campaign(args.seed, args.cases, args.jobs, args.timeout, save=Path(args.out),
                            only=args.case, verbose=args.verbose)
    print(campaign.summary())
    bad = sum(campaign.counts[c] for c in FAILURES)
    if campaign.failures:
        print(f"failing and internal-error inputs written to {args.out}/")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
