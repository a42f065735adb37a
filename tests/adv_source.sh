#!/usr/bin/env bash
# adv_source.sh - issue 29, item 3: a user's image tree, packed by root. Its
# class a holds a link to a root-only image (x.pgm) and a loop (zz -> .., the
# split folder, which would read class b again as a); a class folder c links
# to a root-only folder outside the tree. spritefs-pack, the daemon's
# first-use pack and hntrain's image folder source each pack or read classes a
# and b with 3 images each, never the root-only pixels, never c, and name each
# refused link. In a shared sticky cache folder the daemon sweeps its own
# dead temporaries only.
source "$(dirname "$0")/mount_lib.sh"
source "$(dirname "$0")/adv_lib.sh"
: "${HNTRAIN:?HNTRAIN not set (run through meson test)}"
need_fuse
SECRET_PX=222

# pgm PATH VALUE: a 4x4 gray image of one value
pgm() { printf 'P5\n4 4\n255\n' >"$1" && head -c 16 /dev/zero | tr '\0' "\\$(printf '%03o' "$2")" >>"$1"; }

mkdir -p "$T/rootimgs"
pgm "$T/secret.pgm" $SECRET_PX
pgm "$T/rootimgs/r.pgm" $SECRET_PX
chmod 600 "$T/secret.pgm" "$T/rootimgs/r.pgm"
chmod 700 "$T/rootimgs"
as_user mkdir -p "$T/shared/tree/a" "$T/shared/tree/b"
for i in 1 2 3; do
	as_user bash -c "$(declare -f pgm); pgm '$T/shared/tree/a/$i.pgm' $((10 + i)); pgm '$T/shared/tree/b/$i.pgm' $((100 + i))"
done
as_user ln -s "$T/secret.pgm" "$T/shared/tree/a/x.pgm"
as_user ln -s .. "$T/shared/tree/a/zz"
as_user ln -s "$T/rootimgs" "$T/shared/tree/c"
TREE=$T/shared/tree

refused_named() { # WHAT FILE: every refused link named in FILE
	grep -q "$TREE/a/x.pgm: a symbolic link out of its class folder" "$2" ||
		fail "$1: the link to the root-only image is not named: $(cat "$2")"
	grep -q "$TREE/a/zz: a symbolic link out of its class folder" "$2" ||
		fail "$1: the loop a/zz -> .. is not named: $(cat "$2")"
	grep -q "$TREE/c: a symbolic link out of the source tree" "$2" ||
		fail "$1: the class folder linked out of the tree is not named: $(cat "$2")"
}

# ---- spritefs-pack --------------------------------------------------------------
"$SPRITEFS_PACK" "$TREE" "$T/o.sprites" >"$T/pack.out" 2>&1 || fail "pack: $(tail -3 "$T/pack.out")"
grep -q "found 6, packed 6, skipped 0, ignored 3$" "$T/pack.out" || fail "pack: $(cat "$T/pack.out")"
refused_named spritefs-pack "$T/pack.out"
"$SPRITEFS_PACK" --info "$T/o.sprites" >"$T/info.out" 2>&1 || fail "--info"
grep -q "classes: *2: a, b" "$T/info.out" || fail "pack: classes: $(grep classes "$T/info.out")"
grep -q "class: *a: train 3$" "$T/info.out" || fail "pack: class a: $(grep 'class:' "$T/info.out")"
"$SPRITEFS_PACK" --export "$T/out" --format pgm "$T/o.sprites" >/dev/null 2>&1 || fail "--export"
while read -r f; do
	tail -c 16 "$f" | od -An -tu1 | grep -qw $SECRET_PX && fail "pack: $f holds the root-only image"
done < <(find "$T/out" -type f)
echo "spritefs-pack: a and b, 3 images each; 3 refused links named"

# ---- the daemon's first-use pack of the folder --------------------------------
# (into a shared sticky cache folder, where a dead pack's temporary of root's
# is swept and the attacker's file of the same form is not root's to remove)
mkdir -m 1777 "$T/cache"
: >"$T/cache/mine.sprites.tmp.999999998"
as_user touch "$T/cache/theirs.sprites.tmp.999999999"
sfs_mount "$T/daemon.log" "$TREE" "$T/mnt" -o "cachedir=$T/cache"
[[ -e $T/cache/mine.sprites.tmp.999999998 ]] && fail "mount: a dead pack's temporary was left"
[[ -e $T/cache/theirs.sprites.tmp.999999999 ]] || fail "mount: another user's file was removed"
n_a=$(ls "$T/mnt/train/by-class/a" | wc -l)
n_b=$(ls "$T/mnt/train/by-class/b" | wc -l)
[[ -e $T/mnt/train/by-class/c ]] && fail "mount: class c (outside the tree) is served"
for f in "$T"/mnt/train/by-class/*/*; do
	tail -c 16 "$f" | od -An -tu1 | grep -qw $SECRET_PX && fail "mount: $f holds the root-only image"
done
sfs_umount "$T/mnt"
[[ $n_a -eq 3 && $n_b -eq 3 ]] || fail "mount: by-class/a has $n_a, by-class/b $n_b (want 3, 3)"
grep -q "a symbolic link out of" "$T/daemon.log" || fail "mount: no refused link named: $(cat "$T/daemon.log")"
echo "first-use pack: a and b, 3 images each; refused links named"

# ---- hntrain's image folder source ----------------------------------------------
"$HNTRAIN" --data "$TREE" --model mlp --epochs 1 --threads 1 --tile 4x4x1 >"$T/hn.out" 2>&1 ||
	fail "hntrain: $(tail -3 "$T/hn.out")"
refused_named hntrain "$T/hn.out"
grep -q " 6 train " "$T/hn.out" || fail "hntrain: not 6 training samples: $(grep -m1 train "$T/hn.out")"
echo "hntrain: 6 samples; refused links named"
echo PASS
