#!/usr/bin/env bash
# format.sh - every C, header and CUDA file of the project in .clang-format's
# style (STYLE.md: one style for every file), so that a drift fails here and
# not in the next reader's diff. Reads the files as meson's source tree has
# them (tests/ included); prints each file that differs and the first lines
# clang-format would change, and exits 1 if there is one.
#   usage: format.sh SRCDIR
set -uo pipefail
SRC=${1:?source dir}
command -v clang-format >/dev/null || { echo "SKIP: no clang-format (Debian's clang-format)"; exit 77; }
[[ -f $SRC/.clang-format ]] || { echo "FAIL: no $SRC/.clang-format"; exit 1; }
mapfile -d '' files < <(cd "$SRC" && find bench common cuda fs mount pack tests trainer \
	-type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)
((${#files[@]} > 50)) || { echo "FAIL: only ${#files[@]} C files found under $SRC"; exit 1; }
bad=0
for f in "${files[@]}"; do
	if ! d=$(cd "$SRC" && clang-format --style=file "$f" | diff -u "$f" - ); then
		echo "$f is not in .clang-format's style ('clang-format -i $f'):"
		head -12 <<<"$d" | tail -n +3
		bad=$((bad + 1))
	fi
done
echo "${#files[@]} files read, $bad not in style"
((bad == 0))
