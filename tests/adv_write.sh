#!/usr/bin/env bash
# adv_write.sh - issue 29, item 1 (and 10's --export --force and stale temp):
# root writes into a folder an unprivileged user owns, after that user planted
# links "NAME.tmp.<pid>" -> a root-only 0600 file for the next 2,000 pids.
# spritefs-pack's store, hntrain --checkpoint and --export, spritefs-pack
# --export --force over planted links and a linked split folder, -o log= and
# --log through a link: the root-only file stays byte for byte, each output is
# a regular file of its kind, a world-writable folder without the sticky bit
# is refused by name, and a dead writer's temporary is removed (a live one's,
# and another user's, stay).
source "$(dirname "$0")/mount_lib.sh"
source "$(dirname "$0")/adv_lib.sh"
: "${HNTRAIN:?HNTRAIN not set (run through meson test)}"
D=$T/shared
N=2000

"$MKTREE" gray "$T/src" 3 >/dev/null || fail "mktree"
"$MKSTORE" "$T/d.sprites" --count-train 200 --count-test 40 --tile 8x8x1 --classes 3 \
	--sheet 64 >/dev/null || fail "mkstore"

# ---- spritefs-pack STORE: planted temp names are not written through ---------
plant "$D" o.sprites $N
"$SPRITEFS_PACK" "$T/src" "$D/o.sprites" >"$T/pack.out" 2>&1 || fail "pack: $(tail -3 "$T/pack.out")"
secret_intact "spritefs-pack"
[[ -f $D/o.sprites && ! -L $D/o.sprites ]] || fail "pack: o.sprites is not a regular file"
"$SPRITEFS_PACK" --verify "$D/o.sprites" >/dev/null 2>&1 || fail "pack: the store does not verify"
[[ $(find "$D" -maxdepth 1 -name 'o.sprites.tmp.*' -type f | wc -l) -eq 0 ]] ||
	fail "pack: a temporary file was left"
echo "spritefs-pack: $N planted links passed over, root-only file intact"

# ---- hntrain --checkpoint, --export ----------------------------------------
plant "$D" ck.bin $N
plant "$D" w.npz $N
"$HNTRAIN" --data "$T/d.sprites" --model mlp --epochs 1 --threads 1 --checkpoint "$D/ck.bin" \
	--export "$D/w.npz" >"$T/hn.out" 2>&1 || fail "hntrain: $(tail -3 "$T/hn.out")"
secret_intact "hntrain --checkpoint/--export"
[[ -f $D/ck.bin && ! -L $D/ck.bin ]] && [[ $(head -c 6 "$D/ck.bin") == HNCKPT ]] ||
	fail "hntrain: ck.bin is not a checkpoint"
[[ -f $D/w.npz && ! -L $D/w.npz ]] && [[ $(head -c 2 "$D/w.npz") == PK ]] ||
	fail "hntrain: w.npz is not a zip archive"
echo "hntrain --checkpoint/--export: planted links passed over, root-only file intact"

# ---- a link at the final name is replaced by the rename, never written through
as_user ln -s "$T/secret" "$D/final.sprites"
"$SPRITEFS_PACK" "$T/src" "$D/final.sprites" >"$T/pack2.out" 2>&1 || fail "pack over a link: $(tail -3 "$T/pack2.out")"
secret_intact "spritefs-pack over a link at the final name"
[[ -f $D/final.sprites && ! -L $D/final.sprites ]] || fail "the link at the final name is still there"

# ---- spritefs-pack --export --force: planted links and a linked split folder --
mkdir "$T/rootonly"
chmod 700 "$T/rootonly"
as_user mkdir "$D/exp"
as_user ln -s "$T/rootonly" "$D/exp/train"
rc=0
"$SPRITEFS_PACK" --export "$D/exp" --force "$T/d.sprites" >"$T/exp.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] || fail "--export --force wrote through a linked split folder"
grep -q "exp/train: not a folder (a symbolic link?)" "$T/exp.out" ||
	fail "--export: the linked split folder is not named: $(cat "$T/exp.out")"
[[ -z $(ls -A "$T/rootonly") ]] || fail "--export wrote into the linked root-only folder: $(ls "$T/rootonly")"
# real folders, with the attacker's links at tile names and at temp names
as_user rm "$D/exp/train"
"$SPRITEFS_PACK" --export "$D/exp2" --format pgm "$T/d.sprites" >/dev/null 2>&1 || fail "--export (first)"
chown -R "$ADV_USER" "$D/exp2"
mapfile -t tiles < <(find "$D/exp2" -type f -name '*.pgm' | sort | head -50)
for f in "${tiles[@]}"; do
	as_user rm "$f"
	as_user ln -s "$T/secret" "$f"
	plant "$(dirname "$f")" "$(basename "$f")" 3
done
"$SPRITEFS_PACK" --export "$D/exp2" --format pgm --force "$T/d.sprites" >"$T/exp2.out" 2>&1 ||
	fail "--export --force: $(tail -3 "$T/exp2.out")"
secret_intact "spritefs-pack --export --force"
for f in "${tiles[@]}"; do
	[[ -f $f && ! -L $f ]] || fail "--export --force: $f is still a link"
	[[ $(head -c 2 "$f") == P5 ]] || fail "--export --force: $f is not a PGM"
done
echo "--export --force: ${#tiles[@]} planted tile links replaced, linked split folder refused"

# ---- logs are appended to in place, never through a link ---------------------
as_user ln -s "$T/secret" "$D/daemon.log"
mkdir -p "$T/mnt"
rc=0
"$SPRITEFS" -f -o "log=$D/daemon.log" "$T/d.sprites" "$T/mnt" >"$T/log.out" 2>&1 || rc=$?
is_mounted "$T/mnt" && { fusermount3 -u "$T/mnt"; fail "-o log= through a link: mounted"; }
[[ $rc -ne 0 ]] && grep -q "a symbolic link" "$T/log.out" ||
	fail "-o log= through a link not refused by name (exit $rc): $(cat "$T/log.out")"
# (to a root-only JSON-lines log, which hntrain's own check of --log would take)
printf '{"root": 1}\n' >"$T/root.jsonl"
chmod 600 "$T/root.jsonl"
cp -p "$T/root.jsonl" "$T/root.jsonl.orig"
as_user ln -s "$T/root.jsonl" "$D/hn.jsonl"
rc=0
"$HNTRAIN" --data "$T/d.sprites" --model mlp --epochs 1 --threads 1 --log "$D/hn.jsonl" \
	>"$T/hnlog.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] && grep -q "a symbolic link" "$T/hnlog.out" ||
	fail "hntrain --log through a link not refused by name (exit $rc): $(cat "$T/hnlog.out")"
cmp -s "$T/root.jsonl" "$T/root.jsonl.orig" || fail "hntrain --log appended through a link"
secret_intact "logs"

# ---- a folder anyone may write, without the sticky bit, is refused ----------
mkdir "$T/open"
chmod 777 "$T/open"
rc=0
"$SPRITEFS_PACK" "$T/src" "$T/open/x.sprites" >"$T/open.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] && grep -q "writable by every user and not sticky" "$T/open.out" ||
	fail "a world-writable folder was taken (exit $rc): $(cat "$T/open.out")"
rc=0
"$HNTRAIN" --data "$T/d.sprites" --model mlp --epochs 1 --checkpoint "$T/open/c.bin" \
	>"$T/open2.out" 2>&1 || rc=$?
[[ $rc -ne 0 ]] && grep -q "writable by every user and not sticky" "$T/open2.out" ||
	fail "hntrain --checkpoint into a world-writable folder (exit $rc): $(cat "$T/open2.out")"
chmod 1777 "$T/open" # sticky, like /tmp: taken
"$SPRITEFS_PACK" "$T/src" "$T/open/x.sprites" >/dev/null 2>&1 || fail "a sticky folder was refused"

# ---- stale temporaries: a dead writer's go, a live one's and another user's stay
true &
dead=$!
wait $dead
: >"$D/s.sprites.tmp.$dead"
: >"$D/s.sprites.tmp.$$"
theirs=$D/s.sprites.tmp.999999999 # no such pid: dead, but not ours to remove
as_user touch "$theirs"
"$SPRITEFS_PACK" "$T/src" "$D/s.sprites" >/dev/null 2>&1 || fail "pack s.sprites"
[[ -e $D/s.sprites.tmp.$dead ]] && fail "a dead writer's temporary was left"
[[ -e $D/s.sprites.tmp.$$ ]] || fail "a live writer's temporary was removed"
[[ -e $theirs ]] || fail "another user's file was removed"
echo "stale temporaries: the dead writer's removed, the others kept"
echo PASS
