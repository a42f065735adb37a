#!/usr/bin/python3
"""perm_ref.py - independent Python reference of the sprite permutation.

The algorithm documented in common/perm.h and docs/FORMAT.md is written
from the documentation (not from perm.c) in mount/spritefs/, the Python
reader of a mount; this front end runs it so that tests/test_perm can compare
the C implementation against it. Usage:

  perm_ref.py perm SEED EPOCH N
  perm_ref.py windowed SEED EPOCH N SHEET_TILES WINDOW
  perm_ref.py rng SEED EPOCH COUNT        (raw splitmix64 outputs)

prints the numbers on one line, space-separated.
"""
import os
import sys

# The one copy of the algorithm is the installed reader's (mount/spritefs/__init__.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "mount"))
from spritefs import Rng, perm, perm_windowed  # noqa: E402


def main(argv):
    a = [int(x, 0) for x in argv[2:]]
    if argv[1] == "perm":
        r = perm(*a)
    elif argv[1] == "windowed":
        r = perm_windowed(*a)
    elif argv[1] == "rng":
        g = Rng(a[0], a[1])
        r = [g.next() for _ in range(a[2])]
    else:
        sys.exit("unknown mode " + argv[1])
    print(" ".join(map(str, r)))


if __name__ == "__main__":
    main(sys.argv)
