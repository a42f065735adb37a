"""python_dir.py PREFIX - where a pure Python package installed under PREFIX is
imported from by the interpreter that runs this script (meson.build runs it with
the interpreter the reader is for, Debian's /usr/bin/python3 by default).

The first directory of the interpreter's own sys.path (without PYTHONPATH or the
user's site) that lies under PREFIX/lib: /usr/local/lib/python3.11/dist-packages
for Debian's python3.11 and /usr/local, /usr/lib/python3/dist-packages for /usr.
Under a prefix that the interpreter does not search, the purelib of its
posix_prefix scheme (PREFIX/lib/python3.X/site-packages), which then needs
PYTHONPATH; the second line of the output says so.
"""
import os
import sys
import sysconfig


def main(prefix):
    prefix = os.path.normpath(prefix)
    for d in sys.path:
        if d and os.path.basename(d) in ("dist-packages", "site-packages"):
            rel = os.path.relpath(os.path.normpath(d), prefix)
            if rel.split(os.sep)[0] in ("lib", "lib64"):
                print(d)
                return
    v = {"base": prefix, "platbase": prefix}
    print(sysconfig.get_path("purelib", "posix_prefix", vars=v))
    print(f"{sys.executable} does not search {prefix}: import spritefs needs PYTHONPATH")


if __name__ == "__main__":
    main(sys.argv[1])
