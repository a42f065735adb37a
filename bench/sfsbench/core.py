"""core.py - what every spritefs-bench scenario shares.

One Bench object per run holds the checked configuration, the programs,
the output folder and the workspace (/dev/shm/spritefs-bench.PID and
DISK/spritefs-bench.PID), and gives the scenarios their verbs: progress
lines (msg), notes and failures shown in the report, records appended to
OUT/raw.jsonl (json.dumps, one line each), programs run with their output
logged, the page cache dropped, and `with b.mounted(STORE) as m:`, a
spritefs mount that is taken down on every way out of the block (normal,
an exception, SIGTERM or SIGINT turned into SystemExit by cli.py).
"""
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

PY = "/usr/bin/python3"
MIB = 1 << 20


def cpus_allowed():
    """The CPUs this process may run on (taskset, a cgroup cpuset), in order."""
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = []
    return cpus or list(range(os.cpu_count() or 1))


def find_bin(here, name, var):
    """NAME from $VAR, SPRITEFS_BUILD, beside the script, libexec, then PATH."""
    if os.environ.get(var):
        return os.environ[var]
    build = os.environ.get("SPRITEFS_BUILD")
    if build:
        for root, dirs, files in os.walk(build):
            depth = root[len(build):].count(os.sep)
            if depth >= 2:
                dirs[:] = []
            p = os.path.join(root, name)
            if name in files and os.access(p, os.X_OK):
                return p
    for p in (os.path.join(here, name), os.path.join(here, "..", "libexec", "spritefs", name)):
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return os.path.normpath(p)
    return shutil.which(name) or ""


def find_share(here, name):
    """A data file of the bench: beside the script, or installed under share/."""
    for p in (os.path.join(here, name), os.path.join(here, "..", "share", "spritefs", "bench", name)):
        if os.path.isfile(p):
            return os.path.normpath(p)
    return ""


class Mount:
    """One spritefs daemon on b.mnt (started by Bench.mount)."""

    def __init__(self, proc, mnt):
        self.proc, self.mnt = proc, mnt

    @property
    def pid(self):
        return self.proc.pid

    def memory(self):
        """(VmRSS, VmHWM) of the daemon, bytes."""
        rss = hwm = 0
        try:
            with open(f"/proc/{self.pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1]) * 1024
                    elif line.startswith("VmHWM:"):
                        hwm = int(line.split()[1]) * 1024
        except OSError:
            pass
        return rss, hwm

    def cpu_s(self):
        """The daemon's user + system CPU seconds so far."""
        return proc_cpu_s(self.pid)

    def stats(self):
        try:
            with open(os.path.join(self.mnt, ".spritefs", "stats.json")) as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def unmount(self):
        """fusermount3 -u, else lazily; then the daemon's exit (killed after 10 s)."""
        if self.proc is None:
            return
        for cmd in (["fusermount3", "-u", self.mnt], ["fusermount3", "-uz", self.mnt],
                    ["umount", "-l", self.mnt]):
            if quiet(cmd) == 0 or not os.path.ismount(self.mnt):
                break
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def proc_cpu_s(pid):
    """utime + stime of a process (fields 14 and 15 of /proc/PID/stat), seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


def quiet(cmd):
    """Run CMD with its output thrown away; its exit status (127: not found)."""
    try:
        return subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    except OSError:
        return 127


class Bench:
    """The state of one run: configuration, programs, output, workspace."""

    def __init__(self, cfg, progs):
        self.cfg, self.p = cfg, progs
        self.t0 = time.monotonic()
        self.started = int(time.time())  # whole seconds: what a file's mtime is compared to
        self.failed = False
        self.root = os.geteuid() == 0
        self.cold = "cold" if self.root else "nodrop"
        self.cpus = cpus_allowed()
        self.ncpu = min(len(self.cpus), 64)  # hntrain's CPU backend runs at most 64 threads
        self.tmpfs = f"/dev/shm/spritefs-bench.{os.getpid()}"
        self.ssd = os.path.join(cfg.disk, f"spritefs-bench.{os.getpid()}")
        self.mnt = os.path.join(self.ssd, "mnt")
        self.have_mount = bool(progs.spritefs)
        self.mount_now = None  # the Mount of the block being run, for cleanup
        self.log_at = 0
        self.out = cfg.out

    # ---- output -------------------------------------------------------------
    def open_out(self):
        os.makedirs(os.path.join(self.out, "logs"), exist_ok=True)
        self.out = os.path.abspath(self.out)
        for f in ("raw.jsonl", "notes.txt"):
            open(os.path.join(self.out, f), "w").close()

    def path(self, *parts):
        return os.path.join(self.out, *parts)

    def msg(self, text):
        print(f"[{int(time.monotonic() - self.t0):4d}s] {text}", file=sys.stderr, flush=True)

    def note(self, text):
        """Something skipped or wrong: shown in the report."""
        self.msg("NOTE: " + text)
        with open(self.path("notes.txt"), "a") as f:
            f.write(text + "\n")

    def fail(self, text):
        self.failed = True
        self.note("FAILED: " + text)

    def rec(self, kind, medium, state, run, extra=None, result=None):
        """One measurement, a line of OUT/raw.jsonl."""
        r = {"kind": kind, "medium": medium, "state": state, "run": run}
        r.update(extra or {})
        r["result"] = result
        with open(self.path("raw.jsonl"), "a") as f:
            f.write(json.dumps(r) + "\n")

    # ---- running programs -----------------------------------------------------
    def run_logged(self, name, cmd, **kw):
        """CMD with its output in logs/NAME.log; True when it exited 0."""
        with open(self.path("logs", name + ".log"), "w") as log:
            try:
                return subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, **kw).returncode == 0
            except OSError as e:
                log.write(f"cannot run {cmd[0]}: {e}\n")
                return False

    def output(self, cmd, err_log, timeout=None):
        """CMD's stdout (text), stderr appended to logs/ERR_LOG; None when it fails."""
        with open(self.path("logs", err_log), "a") as err:
            try:
                r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, text=True,
                                   timeout=timeout)
            except (OSError, subprocess.TimeoutExpired) as e:
                err.write(f"{cmd[0]}: {e}\n")
                return None
        return r.stdout if r.returncode == 0 else None

    def die(self, text):
        """A step the rest cannot go without: exit status 1 (cleanup still runs)."""
        print("spritefs-bench: " + text, file=sys.stderr)
        raise SystemExit(1)

    def drop_caches(self):
        if not self.root:
            return
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")

    def cpu_list(self, n):
        """The first N CPUs we may use, comma-separated (taskset -c, --affinity)."""
        return ",".join(str(c) for c in self.cpus[:n])

    # ---- spritefs -------------------------------------------------------------
    def mount(self, store, cache=None, opts=""):
        """A fresh mount of STORE on self.mnt (-o cache=,seed=1 and OPTS), waited for until it
        answers; None if not."""
        log_path = self.path("logs", "spritefs.log")
        self.log_at = os.path.getsize(log_path) if os.path.exists(log_path) else 0
        os.makedirs(self.mnt, exist_ok=True)
        with open(log_path, "a") as log:
            try:
                proc = subprocess.Popen([self.p.spritefs, "-f", "-o",
                                         f"cache={cache or self.cfg.cache},seed=1" + (f",{opts}" if opts else ""),
                                         store, self.mnt],
                                        stdout=log, stderr=subprocess.STDOUT)
            except OSError as e:
                log.write(f"cannot run {self.p.spritefs}: {e}\n")
                return None
        m = Mount(proc, self.mnt)
        self.mount_now = m
        for _ in range(200):
            if os.path.ismount(self.mnt) and os.access(os.path.join(self.mnt, "dataset.json"), os.R_OK):
                return m
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        m.unmount()
        self.mount_now = None
        return None

    def mount_failed(self, store):
        """A mount that did not come up. Not allowed to mount here: a note, and no
        more mounts; anything else: a failure."""
        why = ""
        try:
            with open(self.path("logs", "spritefs.log"), errors="replace") as f:
                f.seek(self.log_at)
                pat = re.compile(r"permission denied|operation not permitted|not allowed|"
                                 r"fusermount3?: .*(failed|denied)", re.I)
                why = next((l.strip() for l in f if pat.search(l)), "")
        except OSError:
            pass
        self.have_mount = False
        if why:
            self.note(f"spritefs may not mount here ({why}): the spritefs medium is skipped "
                      "(run as root, or see fusermount3's setup)")
        else:
            self.fail(f"spritefs did not mount {store} (see logs/spritefs.log)")

    @contextlib.contextmanager
    def mounted(self, store, cache=None, cold=False, opts=""):
        """`with b.mounted(STORE) as m:` - m is the Mount, or None where it did not come
        up (said by mount_failed); unmounted on every way out of the block. cold: the page
        cache dropped first."""
        m = None
        if self.have_mount:
            if cold:
                self.drop_caches()
            m = self.mount(store, cache, opts)
            if m is None:
                self.mount_failed(f"{store}" + (f" with cache={cache}" if cache else ""))
        try:
            yield m
        finally:
            if m is not None:
                m.unmount()
                self.mount_now = None

    # ---- workspace --------------------------------------------------------------
    def remove_stale(self):
        """Folders of a bench killed outright (its PID no longer runs spritefs-bench):
        mounts under them taken down first (deepest first), then removed; data kept with
        --keep stays."""
        dirs = []
        for base in ("/dev/shm", self.cfg.disk):
            try:
                names = os.listdir(base)
            except OSError:
                continue
            dirs += [os.path.join(base, n) for n in sorted(names) if n.startswith("spritefs-bench.")]
        for d in dirs:
            pid = d.rsplit(".", 1)[1]
            if not os.path.isdir(d) or os.path.islink(d) or not pid.isdigit() or int(pid) == os.getpid():
                continue
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if b"spritefs-bench" in f.read():
                        continue  # a bench running now
            except OSError:
                pass
            if os.path.exists(os.path.join(d, ".kept")):
                self.msg(f"kept data of an earlier run (--keep) left in place: {d}")
                continue
            gone = True
            for m in sorted(mounts_under(d), reverse=True):
                if all(quiet(c) != 0 for c in (["fusermount3", "-u", m], ["fusermount3", "-uz", m],
                                               ["umount", "-l", m])):
                    gone = False
                    self.note(f"a killed bench's mount {m} could not be unmounted (fusermount3 -u {m})")
            if not gone:
                continue
            shutil.rmtree(d, ignore_errors=True)
            if os.path.exists(d):
                self.note(f"cannot remove {d}, left by a bench (PID {pid}) that was killed: remove it by hand")
            else:
                self.note(f"removed {d}, left by a bench (PID {pid}) that was killed")

    def cleanup(self):
        """Every exit path: the mount taken down, the workspace removed (or marked kept)."""
        if self.mount_now is not None:
            self.mount_now.unmount()
            self.mount_now = None
        if os.path.ismount(self.mnt):
            quiet(["fusermount3", "-u", self.mnt]) == 0 or quiet(["umount", "-l", self.mnt])
        if self.cfg.keep:
            for d in (self.tmpfs, self.ssd):
                if os.path.isdir(d):
                    open(os.path.join(d, ".kept"), "w").close()
            self.msg(f"kept the prepared data: {self.tmpfs} (tmpfs) and {self.ssd} (disk)")
        else:
            for d in (self.tmpfs, self.ssd):
                shutil.rmtree(d, ignore_errors=True)


def mounts_under(d):
    """Mount points below folder D (/proc/self/mounts escapes a space as \\040)."""
    out = []
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                p = line.split()[1]
                p = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), p)
                if p.startswith(d + "/"):
                    out.append(p)
    except OSError:
        pass
    return out


def machine_info(b, torch_version=""):
    """machine.json: the CPU, memory, kernel, disk, GPU, tool versions and the config."""
    c = b.cfg
    cpu = ""
    try:
        r = subprocess.run(["lscpu"], capture_output=True, text=True, env=dict(os.environ, LC_ALL="C"))
        cpu = next((l.split(":", 1)[1].strip() for l in r.stdout.splitlines()
                    if l.startswith("Model name:")), "")
    except OSError:
        pass
    mem = 0
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    dev = cmd_out(["df", "--output=source", b.ssd]).splitlines()[-1:] or [""]
    dev = dev[0].strip()
    fs = cmd_out(["findmnt", "-no", "FSTYPE", "-T", b.ssd]).strip() or \
        cmd_out(["stat", "-f", "-c", "%T", b.ssd]).strip()
    base = (cmd_out(["lsblk", "-no", "pkname", dev]).splitlines() or [""])[0].strip() \
        or os.path.basename(dev)
    model = read_text(f"/sys/block/{base}/device/model").strip()
    rota = read_text(f"/sys/block/{base}/queue/rotational").strip()
    gpu = (cmd_out(["nvidia-smi", "-L"]).splitlines() or [""])[0] if shutil.which("nvidia-smi") else ""
    osname = ""
    for line in read_text("/etc/os-release").splitlines():
        if line.startswith("PRETTY_NAME="):
            osname = line.split("=", 1)[1].strip().strip('"')
    return {"cpu": cpu, "cores": b.ncpu, "ram_bytes": mem, "kernel": os.uname().release,
            "os": osname,
            "disk": {"path": b.ssd, "device": dev, "fs": fs, "model": model, "rotational": rota},
            "tmpfs": b.tmpfs, "gpu": gpu, "torch": torch_version,
            "fio": cmd_out(["fio", "--version"]).strip(), "root": int(b.root),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "host": os.uname().nodename,
            "config": {"quick": int(c.quick), "dataset": c.dataset, "runs": c.runs,
                       "model": c.model, "epochs": c.epochs, "limit": c.limit,
                       "train_limit": c.train_limit, "cache": c.cache, "threads": b.ncpu,
                       "profile": c.profile, "command": c.command}}


def cmd_out(cmd):
    try:
        return subprocess.run(cmd, capture_output=True, text=True).stdout
    except OSError:
        return ""


def read_text(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def write_json(path, obj):
    with open(path, "w") as f:
        f.write(json.dumps(obj) + "\n")


def parse_json(text):
    """A program's one JSON line (its last, if it printed more); None if none."""
    for line in reversed((text or "").strip().splitlines()):
        try:
            return json.loads(line)
        except ValueError:
            continue
    return None
