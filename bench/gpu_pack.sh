#!/usr/bin/env bash
# gpu_pack.sh - pack what bench/gpu_check.sh needs on a GPU machine that has
# CUDA and PyTorch but not the project's Debian libraries (OpenBLAS, libtiff,
# libturbojpeg, ...): the GPU binaries of a build and every library they link
# that is neither glibc's, the C++ runtime's nor CUDA's, in one .tar.xz.
#
#   bench/gpu_pack.sh BUILD OUT.tar.xz
#
# BUILD is a meson build with the CUDA plugin (best configured -Dmpi=disabled:
# Open MPI's components are not worth carrying for one-GPU checks). Unpack
# with `tar xJf OUT.tar.xz -C DIR` and pass DIR to gpu_check.sh.
set -euo pipefail
if (($# != 2)); then
	sed -n 2,11p "$0" >&2
	exit 2
fi
B=$1 T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/lib"
for f in trainer/hntrain cuda/hntrain-cuda.so tests/test_gpu_layers tests/test_gpu_train tests/mkstore; do
	[[ -f $B/$f ]] || { echo "gpu_pack.sh: $B/$f is missing (build it first)" >&2; exit 1; }
	cp "$B/$f" "$T/"
	ldd "$B/$f" | awk '$3 ~ /^\// {print $3}' | while read -r l; do
		case $(basename "$l") in
		libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libstdc++.so* | libgcc_s.so*) ;;
		libcuda* | libcublas* | libcudnn* | libnccl*) ;;
		*) cp -L "$l" "$T/lib/" ;;
		esac
	done
done
tar cf - -C "$T" . | xz -T0 -6 >"$2"
ls -la "$2"
