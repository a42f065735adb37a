#!/usr/bin/env bash
# mount_stats.sh - /.spritefs/stats.json stays live and whole, whether the
# kernel opens files by itself (FUSE no_open, the default where the kernel
# offers it) or asks the daemon (-o kernel_open=0): it is SFS_STATS_SIZE
# (4096) bytes of valid JSON padded with spaces, a read after the counters
# moved sees them moved (the daemon's CPU time and its cost per GB served
# too), also through one open descriptor, and with no_open
# the daemon sees no opens for the files a reader opens.
source "$(dirname "$0")/mount_lib.sh"
need_fuse
PY=$(command -v python3) || { echo "SKIP: no python3"; exit 77; }

"$MKSTORE" "$T/s.sprites" --count-train 2000 --count-test 100 --sheet 128 >"$T/mkstore.log" 2>&1 ||
	fail "mkstore"
for ko in 1 0; do
	sfs_mount "$T/spritefs.log" "$T/s.sprites" "$T/mnt" -o "cache=16M,kernel_open=$ko"
	"$PY" - "$T/mnt" "$ko" <<'PYEOF' || fail "stats.json with kernel_open=$ko"
import json, os, sys, time
mnt, ko = sys.argv[1], sys.argv[2] == "1"
path = os.path.join(mnt, ".spritefs", "stats.json")

def snap():
    with open(path, "rb") as f:
        b = f.read()
    assert len(b) == 4096 and os.stat(path).st_size == 4096, f"size {len(b)}, st_size {os.stat(path).st_size}"
    assert b.endswith(b"\n"), "no final newline"
    return json.loads(b)

a = snap()
kernel = a["kernel_open"]
if not ko:
    assert kernel is False, "kernel_open=0 but stats say kernel_open true"
batches = sorted(os.listdir(os.path.join(mnt, "train", "batches")))
for name in batches:
    with open(os.path.join(mnt, "train", "batches", name), "rb") as f:
        f.read()
time.sleep(0.03)  # mtime moves in 10 ms steps
b = snap()
assert b["bytes_served"] > a["bytes_served"], f"bytes_served did not move: {a['bytes_served']} -> {b['bytes_served']}"
assert b["uptime_s"] > a["uptime_s"], "uptime did not move"
# the daemon's CPU: user + system, and per GB served (null before any byte)
assert b["cpu_s"] > 0 and abs(b["cpu_s"] - b["cpu_user_s"] - b["cpu_sys_s"]) < 0.0015, b
assert b["cpu_s"] >= a["cpu_s"] and b["cpu_s"] < b["uptime_s"] * os.cpu_count() + 1, (a, b)
gb = b["bytes_served"] / 1e9  # cpu_s is written to the millisecond
assert abs(b["cpu_s_per_gb_served"] - b["cpu_s"] / gb) <= 0.0006 / gb + 0.001, b
if kernel:
    assert b["opens"] <= 1, f"kernel_open but the daemon saw {b['opens']} opens"
else:
    assert b["opens"] >= len(batches), f"{b['opens']} opens for {len(batches)} files"
# one descriptor, read twice: the second read sees the newer counters
with open(path, "rb") as f:
    one = json.loads(f.read())
    for name in batches[:3]:
        with open(os.path.join(mnt, "train", "batches", name), "rb") as g:
            g.read()
    time.sleep(0.03)
    f.seek(0)
    two = json.loads(f.read())
assert two["requests"] > one["requests"] or two["uptime_s"] > one["uptime_s"], "second read of one descriptor is stale"
# I/O buffers registered with io_uring: some or none, never more than there are; all of
# them for root, whose pinned memory is not counted against RLIMIT_MEMLOCK (CAP_IPC_LOCK)
assert 0 < b["io_buffers"] and 0 <= b["io_buffers_registered"] <= b["io_buffers"], b
if os.geteuid() == 0:
    assert b["io_buffers_registered"] == b["io_buffers"], b
print(f"kernel_open={ko}: kernel opens {kernel}, opens seen {b['opens']}, bytes_served {a['bytes_served']} -> {b['bytes_served']}")
PYEOF
	sfs_umount "$T/mnt"
done
echo "PASS"
