#!/usr/bin/env bash
# hntrain_limit.sh - --limit N is a seeded sample of the split, not its first
# N files: on an image folder sorted by class (mktree's, class by class) the
# picked samples cover every class, and the picked ids (HNTRAIN_DUMP_IDS), and
# so the weights, are the same from the folder, its store and the store's
# mount, with and without --preload; another seed picks others.
source "$(dirname "$0")/hntrain_common.sh"
[[ -n ${MKTREE:-} && -n ${SPRITEFS_PACK:-} ]] || { echo "SKIP: needs mktree and spritefs-pack"; exit 77; }

"$MKTREE" gray "$TMP/tree" 20 >/dev/null || fail "mktree"
"$SPRITEFS_PACK" -q "$TMP/tree" "$TMP/d.sprites" >/dev/null 2>&1 || fail "spritefs-pack"
run=(--limit 12 --test-limit 5 --model mlp --threads 1 --epochs 1 --batch 4)

ids_of() { # NAME ARGS...: the picked ids and labels into $TMP/ids-NAME, the hash on stdout
	local name=$1
	shift
	HNTRAIN_DUMP_IDS="$TMP/ids-$name" hash_of "$@"
	[[ -s $TMP/ids-$name ]] || fail "$name: HNTRAIN_DUMP_IDS wrote nothing"
}

ref=$(ids_of folder --data "$TMP/tree" "${run[@]}")
n=$(wc -l <"$TMP/ids-folder")
[[ $n -eq 12 ]] || fail "--limit 12 used $n samples"
classes=$(cut -d' ' -f2 "$TMP/ids-folder" | sort -u | wc -l)
echo "folder: ids $(cut -d' ' -f1 "$TMP/ids-folder" | tr '\n' ' ')($classes classes)"
[[ $classes -ge 3 ]] || fail "--limit 12 on a folder sorted by class picked $classes classes, not 3"
[[ $(cut -d' ' -f1 "$TMP/ids-folder" | sort -n | tail -1) -ge 30 ]] ||
	fail "--limit 12 picked only from the start of the split"

h=$(ids_of store --data "$TMP/d.sprites" "${run[@]}")
cmp -s "$TMP/ids-folder" "$TMP/ids-store" || fail "the store picks other samples than its folder"
[[ $h == "$ref" ]] || fail "store: weights $h, folder $ref"
h=$(ids_of preload --data "$TMP/d.sprites" --preload "${run[@]}")
cmp -s "$TMP/ids-folder" "$TMP/ids-preload" || fail "--preload picks other samples"
[[ $h == "$ref" ]] || fail "store --preload: weights $h, folder $ref"
if [[ -n ${SPRITEFS:-} && -e /dev/fuse ]]; then
	mount_store "$TMP/d.sprites" "$TMP/m"
	h=$(ids_of mount --data "$TMP/m" "${run[@]}")
	cmp -s "$TMP/ids-folder" "$TMP/ids-mount" || fail "the mount picks other samples than its store"
	[[ $h == "$ref" ]] || fail "mount: weights $h, folder $ref"
else
	echo "no mount part: no spritefs or /dev/fuse"
fi

# deterministic by the seed: the same again, another seed another pick
ids_of again --data "$TMP/tree" "${run[@]}" >/dev/null
cmp -s "$TMP/ids-folder" "$TMP/ids-again" || fail "the same seed picked other samples"
ids_of seed2 --data "$TMP/tree" "${run[@]}" --seed 2 >/dev/null
cmp -s "$TMP/ids-folder" "$TMP/ids-seed2" && fail "--seed 2 picked the same samples as --seed 1"
echo PASS
