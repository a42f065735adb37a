#!/usr/bin/env bash
# hntrain_cuda_libs - the GPU plugin finds its CUDA libraries where machines
# keep them, not only where its RUNPATH says: in a Python venv's nvidia-*
# wheels (NCCL too), under $CUDA_HOME/targets/*/lib; and when none is anywhere, the
# error names the missing library and every folder searched.
#
# In a private mount namespace the toolkit (/usr/local/cuda-*) is hidden
# under an empty tmpfs, after its lib folder was bind-mounted into a fake
# venv and a fake CUDA_HOME. No GPU is needed: the libraries load, the GPU is
# not touched (hntrain -V).
source "$(dirname "$0")/hntrain_common.sh"

[[ ${HNTRAIN_CUDA_BUILT:-0} == 1 ]] || { echo "SKIP: the CUDA plugin is not built"; exit 77; }
[[ $(id -u) -eq 0 ]] || { echo "SKIP: needs root for a private mount namespace"; exit 77; }
command -v unshare >/dev/null || { echo "SKIP: no unshare"; exit 77; }
real=$(readlink -f /usr/local/cuda/lib64 2>/dev/null)
[[ -n $real && -e $real/libcudnn.so.9 ]] ||
	{ echo "SKIP: the toolkit the plugin was built with is not in /usr/local/cuda"; exit 77; }

V="$TMP/venv"
W="$V/lib/python3.11/site-packages/nvidia"
mkdir -p "$V/bin" "$W/cudnn/lib" "$W/cublas/lib" "$W/cuda_runtime/lib" "$W/nccl/lib" \
	"$TMP/tk/targets/x86_64-linux/lib" "$TMP/empty"
printf '#!/bin/sh\nexit 0\n' >"$V/bin/python3"
chmod +x "$V/bin/python3"

# ns_run SETUP CMD...: run CMD in a namespace with the toolkit hidden
ns_run() {
	unshare -m --propagation private bash -c '
		set -e
		for d in cudnn cublas cuda_runtime nccl; do mount --bind -o ro "$0" "$1/$d/lib"; done
		mount --bind -o ro "$0" "$2/targets/x86_64-linux/lib"
		for t in /usr/local/cuda-*; do [[ -d $t ]] && mount -t tmpfs none "$t"; done
		shift 2
		exec "$@"' "$real" "$W" "$TMP/tk" "$@"
}

clean_env=(env -u LD_LIBRARY_PATH -u CUDA_HOME -u CUDA_PATH -u VIRTUAL_ENV HOME="$TMP/empty")

# 1. cuDNN, cuBLAS, cudart from the venv of the python3 on PATH
ns_run "${clean_env[@]}" PATH="$V/bin:/usr/bin:/bin" "$HNTRAIN" -V >"$TMP/v" 2>&1 ||
	{ cat "$TMP/v"; fail "hntrain -V with the libraries in a venv exited $?"; }
for lib in libcudart.so.13 libcublas.so.13 libcudnn.so.9; do
	grep -Eq "^gpu: $lib $W/[a-z_]+/lib/$lib\$" "$TMP/v" ||
		{ cat "$TMP/v"; fail "$lib not found in the venv's nvidia wheels"; }
done
# NCCL, which the plugin loads only for several ranks, where the toolkit has it
if [[ -e $real/libnccl.so.2 ]]; then
	grep -Eq "^gpu: libnccl.so.2 $W/[a-z_]+/lib/libnccl.so.2 \(for several ranks\)\$" "$TMP/v" ||
		{ cat "$TMP/v"; fail "libnccl.so.2 not found in the venv's nvidia wheels"; }
fi

# 2. the same from $CUDA_HOME/targets/x86_64-linux/lib
ns_run "${clean_env[@]}" CUDA_HOME="$TMP/tk" PATH=/usr/bin:/bin "$HNTRAIN" -V >"$TMP/v" 2>&1 ||
	{ cat "$TMP/v"; fail "hntrain -V with CUDA_HOME exited $?"; }
grep -qx "gpu: libcudnn.so.9 $TMP/tk/targets/x86_64-linux/lib/libcudnn.so.9" "$TMP/v" ||
	{ cat "$TMP/v"; fail "libcudnn.so.9 not found under \$CUDA_HOME/targets/*/lib"; }

# 3. nowhere: the missing library and the folders searched are named; exit 1
"$MKSTORE" "$TMP/d.sprites" --count-train 100 --count-test 20 --tile 8x8x1 --classes 2 \
	>/dev/null || fail "mkstore"
rc=0
ns_run "${clean_env[@]}" CUDA_HOME="$TMP/empty" PATH=/usr/bin:/bin \
	"$HNTRAIN" --quiet --data "$TMP/d.sprites" --model mlp --device gpu >"$TMP/e" 2>&1 || rc=$?
[[ $rc -eq 1 ]] || { cat "$TMP/e"; fail "no CUDA libraries: exit $rc, want 1"; }
grep -q "cannot load the CUDA backend: libcudart.so.13 not found" "$TMP/e" ||
	{ cat "$TMP/e"; fail "the missing library is not named"; }
grep -qx "  /usr/lib/x86_64-linux-gnu" "$TMP/e" || { cat "$TMP/e"; fail "the folders searched are not listed"; }
cat "$TMP/e"
echo "PASS"
