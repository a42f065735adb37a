#!/usr/bin/env bash
# python_package.sh - the Python reader installs where the Python that
# imports it looks: meson installs the package spritefs (spritefs/__init__.py,
# spritefs/torch.py, from `meson introspect --installed`) into a folder of
# Debian's /usr/bin/python3's own sys.path (no PYTHONPATH, no user site), so
# a wrong install dir fails here whether or not this tree was installed. When
# it was (./run test installs before the suite), the installed copy equals
# the source, `import spritefs, spritefs.torch` with no PYTHONPATH imports
# it from there, and it computes the documented permutation of
# tests/perm_ref.py. Skips only without /usr/bin/python3 and numpy.
set -u
: "${SRCDIR:?SRCDIR not set (run through meson test)}" "${MESON_BUILD:?MESON_BUILD not set}"
source "$(dirname "$0")/py_lib.sh"
unset PYTHONPATH
fail() { echo "FAIL: $*" >&2; exit 1; }
[[ -x $PY ]] && $PY -c "import numpy" 2>/dev/null || { echo "SKIP: no numpy for /usr/bin/python3"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/sfs-py.XXXXXX")
trap 'rm -rf "$T"' EXIT
cd "$T" || fail "cd $T"

meson introspect "$MESON_BUILD" --installed >"$T/installed.json" || fail "meson introspect --installed"
dest=$($PY - "$T/installed.json" "$SRCDIR" <<'PY'
import json, os, sys
inst = json.load(open(sys.argv[1]))
src = os.path.realpath(os.path.join(sys.argv[2], "mount", "spritefs"))
want = sorted(f for f in os.listdir(src) if f.endswith(".py"))
got = {os.path.basename(s): d for s, d in inst.items()
       if os.path.dirname(os.path.realpath(s)) == src}
assert sorted(got) == want, f"meson installs {sorted(got)} of mount/spritefs, not {want}"
dirs = {os.path.dirname(d) for d in got.values()}
assert len(dirs) == 1, f"installed to several folders: {dirs}"
d = dirs.pop()
assert os.path.basename(d) == "spritefs", d
print(os.path.dirname(d))
PY
) || fail "the package's install rule: $dest"
echo "meson installs spritefs to $dest/spritefs"
[[ $dest == "$SPRITEFS_PYDIR" ]] || fail "tests/meson.build says $SPRITEFS_PYDIR, the install rule $dest"
$PY -s -c 'import sys; print("\n".join(sys.path))' >"$T/syspath" || fail "$PY sys.path"
grep -qxF "$dest" "$T/syspath" ||
	fail "$dest is not on $PY's sys.path ($(tr '\n' ' ' <"$T/syspath")): import spritefs would fail"
echo "$dest is on $PY's sys.path"

if ! py_installed_current; then
	echo "this tree is not installed (meson install): the import of the installed copy not run"
	echo "PASS"
	exit 0
fi
$PY -s - "$dest" "$SRCDIR/tests/perm_ref.py" >"$T/import.log" 2>&1 <<'PY' || fail "import: $(tail -5 "$T/import.log")"
import os, subprocess, sys
import spritefs, spritefs.torch
dest, ref = sys.argv[1], sys.argv[2]
for m in (spritefs, spritefs.torch):
    assert os.path.dirname(m.__file__) == os.path.join(dest, "spritefs"), m.__file__
assert spritefs.EpochDataset is spritefs.torch.EpochDataset
out = subprocess.run([sys.executable, ref, "windowed", "7", "2", "1000", "64", "3"],
                     check=True, capture_output=True, text=True).stdout.split()
assert list(spritefs.perm_windowed(7, 2, 1000, 64, 3)) == [int(x) for x in out]
print(f"import spritefs: {spritefs.__file__}, spritefs.torch: {spritefs.torch.__file__}")
PY
cat "$T/import.log"
echo "PASS"
