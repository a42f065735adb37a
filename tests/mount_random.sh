#!/usr/bin/env bash
# mount_random.sh - the mount over stores and options drawn at random from a
# seed: tile sides 1..64 with 1, 3 or 4 channels, 1..300 classes, sheets of
# 1..300 tiles, splits of 1..2000 and 0..300 samples, lz4 or raw, and any
# mix of cache (down to less than one sheet), prefetch, workers, batch,
# window, direct, push and kernel_open; in a third of the cases one sheet
# of the store is damaged. Every view is checked byte-exact by mount_check,
# read with and without O_DIRECT: what needs the damaged sheet must fail
# with EIO, the rest must read exactly; the daemon must stay up.
# Deterministic: SPRITEFS_TEST_SEED (default 1) and SPRITEFS_TEST_ROUNDS
# (default 8) pick the cases, and a failure prints the case and its seed.
source "$(dirname "$0")/mount_lib.sh"
need_fuse

seed=${SPRITEFS_TEST_SEED:-1}
rounds=${SPRITEFS_TEST_ROUNDS:-8}
RANDOM=$seed
# pick LO HI / one_of A B...: a draw into REPLY, always in this shell (a
# $(...) subshell would reseed RANDOM and break the determinism).
pick() {
	REPLY=$(($1 + (RANDOM * 32768 + RANDOM) % ($2 - $1 + 1)))
}
one_of() {
	local a=("$@")
	REPLY=${a[RANDOM % ${#a[@]}]}
}

for ((r = 1; r <= rounds; r++)); do
	pick 1 64; h=$REPLY
	pick 1 64; w=$REPLY
	one_of 1 3 4; c=$REPLY
	pick 1 300; classes=$REPLY
	pick 1 300; sheet=$REPLY
	pick 1 2000; ntrain=$REPLY
	pick 1 300; one_of 0 "$REPLY"; ntest=$REPLY
	one_of lz4 none; codec=$REPLY
	mk="--count-train $ntrain --count-test $ntest --tile ${h}x${w}x${c} --sheet $sheet"
	pick 0 6; ((REPLY)) && mk+=" --window $REPLY" # the data set's order; 0: the default
	mk+=" --classes $classes --codec $codec --seed $r"
	one_of 1M 2M 4M 64M; cache=$REPLY; opts="cache=$cache"
	pick 0 16; opts+=",prefetch=$REPLY"
	pick 1 4; opts+=",workers=$REPLY"
	pick 1 500; opts+=",batch=$REPLY"
	pick 0 5; opts+=",window=$REPLY"
	pick 0 1; opts+=",direct=$REPLY"
	pick 0 1; opts+=",push=$REPLY"
	pick 0 1; opts+=",kernel_open=$REPLY"
	pick 0 99; epoch_seed=$REPLY
	opts+=",seed=$epoch_seed"
	pick 1 2; chk="--seed $epoch_seed --epochs $REPLY"
	one_of "" --direct; chk+=" $REPLY"
	nsheets=$(((ntrain + sheet - 1) / sheet + (ntest + sheet - 1) / sheet))
	pick 0 $((3 * nsheets - 1)); bad=$REPLY # < nsheets: damage that sheet
	case_="seed $seed round $r: mkstore $mk; spritefs -o $opts; mount_check $chk"

	# shellcheck disable=SC2086
	"$MKSTORE" "$T/s.sprites" $mk >"$T/mkstore.log" 2>&1 || fail "[$case_] mkstore"
	want_bad=0
	if ((bad < nsheets)); then
		"$MOUNT_CHECK" --corrupt "$T/s.sprites" "$bad" >/dev/null || fail "[$case_] --corrupt $bad"
		case_+="; sheet $bad damaged"
		want_bad=1
	fi
	# a budget below 2 sheets is refused, naming the smallest that works
	big=$((ntrain > ntest ? ntrain : ntest)); ((big > sheet)) && big=$sheet
	ids=$(((64 + 2 * big + 63) / 64 * 64)); tiles=$(((ids + 4 * big + 63) / 64 * 64))
	block=$(((tiles + big * h * w * c + 4095) / 4096 * 4096))
	if ((${cache%M} << 20 < 2 * block)); then
		rc=0
		"$SPRITEFS" -f -o "$opts" "$T/s.sprites" "$T/mnt" >"$T/refused.log" 2>&1 || rc=$?
		[[ $rc -eq 2 ]] && grep -q "holds fewer than 2 sheets of .*: the smallest budget that works is" \
			"$T/refused.log" || fail "[$case_] cache=$cache below 2 sheets: exit $rc, $(cat "$T/refused.log")"
		opts=${opts/cache=$cache/cache=$((2 * block))}
	fi
	sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o "$opts"
	# shellcheck disable=SC2086
	"$MOUNT_CHECK" "$T/s.sprites" "$T/mnt" $chk >"$T/check.log" 2>&1 ||
		fail "[$case_] $(tail -5 "$T/check.log")"
	kill -0 "$SFS_PID" 2>/dev/null || fail "[$case_] the daemon died"
	cf=$(stat_field "$T/mnt" checksum_failures)
	[[ $cf -eq $want_bad ]] || fail "[$case_] $cf checksum failures, expected $want_bad"
	grep -q " $want_bad bad sheets" "$T/check.log" || fail "[$case_] $(tail -1 "$T/check.log")"
	echo "[round $r] ${h}x${w}x${c} $classes classes, $ntrain+$ntest samples, sheet $sheet," \
		"$codec$( ((want_bad)) && echo ", sheet $bad damaged"), -o $opts: $(tail -1 "$T/check.log")"
	sfs_umount "$T/mnt"
done
echo "PASS"
