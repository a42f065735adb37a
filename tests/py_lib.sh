# py_lib.sh - which copy of the Python reader (the package spritefs) a test
# imports, with Debian's /usr/bin/python3 (sourced, not run).
#
# The installed one when it is this tree's (./run test installs before the
# suite): imported as a user runs it, without PYTHONPATH. Otherwise (a build
# tree that was not installed) the source package mount/spritefs, through
# PYTHONPATH. SPRITEFS_PYDIR (tests/meson.build): where meson installs it.
PY=/usr/bin/python3
unset PYTHONPATH
py_installed_current() {
	local f
	[[ -n ${SPRITEFS_PYDIR:-} ]] || return 1
	for f in "$SRCDIR"/mount/spritefs/*.py; do
		cmp -s "$f" "$SPRITEFS_PYDIR/spritefs/${f##*/}" || return 1
	done
}
if py_installed_current; then
	PY_READER="installed: $SPRITEFS_PYDIR/spritefs"
else
	export PYTHONPATH="$SRCDIR/mount"
	PY_READER="source: $SRCDIR/mount/spritefs (this tree is not installed)"
fi
