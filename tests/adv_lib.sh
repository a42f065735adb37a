# adv_lib.sh - shared helpers of the adversarial tests (issue 29), sourced
# after mount_lib.sh: an unprivileged user made for the test and removed on
# exit, a root-only file to guard, links planted for the next pids.
#
# Environment (tests/meson.build): mount_lib.sh's, and HNTRAIN.

[[ $(id -u) -eq 0 ]] || { echo "SKIP: the attacks are on root's writes; run as root"; exit 77; }
command -v useradd >/dev/null && command -v userdel >/dev/null &&
	command -v runuser >/dev/null || { echo "SKIP: no useradd/userdel/runuser"; exit 77; }
PY=/usr/bin/python3
[[ -x $PY ]] || { echo "SKIP: no /usr/bin/python3"; exit 77; }

# The attacker: a fresh system user, no home; removed by the EXIT trap.
ADV_USER="sfsadv$$"
adv_cleanup() {
	cleanup
	userdel "$ADV_USER" 2>/dev/null || true
}
trap adv_cleanup EXIT
useradd -M -N -r -s /usr/sbin/nologin "$ADV_USER" >/dev/null 2>&1 ||
	{ echo "SKIP: useradd $ADV_USER failed"; exit 77; }
chmod 711 "$T" # the user may pass through the test folder, not list it

# as_user CMD...: run as the attacker
as_user() {
	runuser -u "$ADV_USER" -- "$@"
}

# A root-only file that no write of ours may reach, and a copy to compare with.
printf 'root-only secret, must stay as it is\n' >"$T/secret"
chmod 600 "$T/secret"
cp -p "$T/secret" "$T/secret.orig"

# secret_intact WHAT: the root-only file is unchanged (content and type)
secret_intact() {
	[[ -f $T/secret && ! -L $T/secret ]] || fail "$1: $T/secret is no longer a plain file"
	cmp -s "$T/secret" "$T/secret.orig" || fail "$1: the root-only file was overwritten: $(head -c 64 "$T/secret" | od -c | head -2)"
}

# plant DIR NAME N: as the attacker, links DIR/NAME.tmp.<pid> -> $T/secret for
# the next N pids (after the last one the kernel handed out)
plant() {
	local dir=$1 name=$2 n=$3 last
	last=$(cat /proc/sys/kernel/ns_last_pid)
	as_user "$PY" - "$dir" "$name" "$last" "$n" "$T/secret" <<'EOF' || fail "planting links in $1"
import os, sys
d, name, last, n, target = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
for pid in range(last + 1, last + 1 + n):
    os.symlink(target, os.path.join(d, f"{name}.tmp.{pid}"))
EOF
}

# A folder the attacker owns and root writes into.
mkdir "$T/shared"
chown "$ADV_USER" "$T/shared"
chmod 755 "$T/shared"
