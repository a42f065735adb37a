# order_ab.py - A/B of cold and warm epoch-view reads, two spritefs binaries alternated
#   /usr/bin/python3 bench/order_ab.py OLD_SPRITEFS NEW_SPRITEFS MKSTORE RUNS
# (docs/ARCHITECTURE.md, "Epoch orders are built on builder threads"). Mounts a 60,000-sample
# 28x28 store (made in a temporary folder) RUNS times per binary; reads epoch 0 of a fresh seed
# with O_DIRECT three times: the first is cold (order and sheets), the best of the others warm.
import os, shutil, subprocess, sys, tempfile, time, statistics
old, new, mkstore = sys.argv[1:4]
T = tempfile.mkdtemp(prefix="order-ab.")
os.makedirs(T + "/m", exist_ok=True)
st = T + "/s.sprites"
subprocess.run([mkstore, st, "--count-train", "60000", "--count-test", "10", "--tile", "28x28x1"], check=True, stdout=subprocess.DEVNULL)
def run(binary, seed):
    p = subprocess.Popen([binary, "-f", "-o", "cache=256M", st, T + "/m"], stderr=subprocess.DEVNULL)
    for _ in range(100):
        if os.path.ismount(T + "/m"): break
        time.sleep(0.05)
    res = []
    for rep in range(3):  # rep 0: cold (order built, sheets loaded); 1, 2: warm
        d = "%s/m/train/epochs/%d/0" % (T, seed)
        t0 = time.monotonic()
        for f in sorted(os.listdir(d)):
            fd = os.open(d + "/" + f, os.O_RDONLY | os.O_DIRECT)
            while os.read(fd, 1 << 20): pass
            os.close(fd)
        res.append(time.monotonic() - t0)
    subprocess.run(["fusermount3", "-u", T + "/m"], check=True)
    p.wait()
    return res[0], min(res[1:])
r = {"old": [], "new": []}
for k in range(int(sys.argv[4])):
    for name, b in (("old", old), ("new", new)) if k % 2 == 0 else (("new", new), ("old", old)):
        r[name].append(run(b, 100 + k))
for i, what in ((0, "cold"), (1, "warm")):
    o = statistics.median(x[i] for x in r["old"]); n = statistics.median(x[i] for x in r["new"])
    print("%s epoch (938 files, O_DIRECT): old %.3f s, new %.3f s, new/old %.3f" % (what, o, n, n / o))
shutil.rmtree(T)
