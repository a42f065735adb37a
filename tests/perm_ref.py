#!/usr/bin/python3
"""perm_ref.py - independent Python reference of the sprite permutation.

This is the algorithm documented in common/perm.h and docs/FORMAT.md, written
from the documentation (not from perm.c), so that tests/test_perm can compare
the C implementation against it. Usage:

  perm_ref.py perm SEED EPOCH N
  perm_ref.py windowed SEED EPOCH N SHEET_TILES WINDOW
  perm_ref.py rng SEED EPOCH COUNT        (raw splitmix64 outputs)

prints the numbers on one line, space-separated.
"""
import sys

M64 = (1 << 64) - 1


class Rng:
    def __init__(self, seed, epoch):
        self.s = (seed ^ (epoch * 0xD1B54A32D192ED03)) & M64

    def next(self):
        self.s = (self.s + 0x9E3779B97F4A7C15) & M64
        z = self.s
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
        return z ^ (z >> 31)

    def below(self, k):
        return (self.next() * k) >> 64


def shuffle(rng, a):
    for i in range(len(a) - 1, 0, -1):
        j = rng.below(i + 1)
        a[i], a[j] = a[j], a[i]


def perm(seed, epoch, n):
    rng = Rng(seed, epoch)
    p = list(range(n))
    shuffle(rng, p)
    return p


def perm_windowed(seed, epoch, n, sheet_tiles, window):
    if n == 0:
        return []
    if sheet_tiles == 0 or sheet_tiles > n:
        sheet_tiles = n
    window = max(window, 1)
    nsheets = (n + sheet_tiles - 1) // sheet_tiles
    if window >= nsheets:
        return perm(seed, epoch, n)
    nwin = (nsheets + window - 1) // window
    rng = Rng(seed, epoch)
    worder = list(range(nwin))
    shuffle(rng, worder)
    strata = []
    for first in range(0, nsheets, nwin):
        members = list(range(first, min(first + nwin, nsheets)))
        shuffle(rng, members)
        strata.append(members)
    out = []
    for w in worder:
        samples = []
        for members in strata:
            if w < len(members):
                s = members[w]
                samples.extend(range(s * sheet_tiles, min((s + 1) * sheet_tiles, n)))
        shuffle(rng, samples)
        out.extend(samples)
    return out


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
