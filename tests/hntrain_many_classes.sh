#!/usr/bin/env bash
# hntrain_many_classes.sh - a mount of as many classes as the store format
# takes (65,535) trains as its store file does. dataset.json then runs to
# megabytes; hntrain once read it with a 1 MiB cap ("File too large"), and
# parsed it with the length of the stats page read after it, which cut a
# 1,000-class list short ("malformed classes list").
source "$(dirname "$0")/hntrain_common.sh"
[[ -n ${SPRITEFS:-} && -e /dev/fuse ]] || { echo "SKIP: no spritefs or /dev/fuse"; exit 77; }

for k in 1000 65535; do
	"$MKSTORE" "$TMP/c$k.sprites" --count-train 2000 --count-test 200 --tile 4x4x1 \
		--classes "$k" >/dev/null || fail "mkstore $k classes"
	mount_store "$TMP/c$k.sprites" "$TMP/m$k"
	size=$(stat -c %s "$TMP/m$k/dataset.json")
	args=(--model d16 --epochs 1 --batch 50 --threads 1)
	want=$(hash_of --data "$TMP/c$k.sprites" "${args[@]}")
	same_hash "mount, $k classes" "$want" --data "$TMP/m$k" "${args[@]}"
	echo "$k classes: dataset.json $size bytes"
done
((size > 1048576)) || fail "65,535 classes gave only $size bytes of dataset.json: no test of the cap"
echo PASS
