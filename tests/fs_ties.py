#!/usr/bin/python3
"""fs_ties.py - the include and call ties between the daemon's files, and
its one allowed circle.

fs/ has floors: log.c at the bottom, then the label table, the cache and
prefetcher, the readers, the tree, the FUSE handlers, main on top
(docs/ARCHITECTURE.md). A file that calls a function of a file above it
closes a circle, and then neither can be read, changed or tested without
the other. The one circle the design has is cache.c <-> prefetch.c: the
cache submits a sheet's read, the prefetcher completes it into the cache
(the lock order in fs/sfs.h says how the two locks nest). This test counts
the ties and fails on any other circle.

A tie A -> B is a call or reference in A of a function or variable that
B defines without `static`, or an `#include "fs/B.h"` in A. The scanner is
not a parser: it drops comments, strings and character literals, takes as
definitions the file-level lines (column 0) that name an identifier before
"=" or before "(" without ending in ";", and as uses every other occurrence of
those names. It is checked on made-up files first.

It also checks that fs/ is the daemon and nothing else: every fs/*.c is one
of spritefs's sources in fs/meson.build, which builds no other program.

Usage: fs_ties.py [ROOT]   (ROOT: the source tree, default this file's
parent folder). Prints the tie table, then each circle found; exits 1 when
a circle other than cache.c <-> prefetch.c exists, when fs/ holds more than
the daemon, or when the self-check fails; 0 otherwise.
"""
import os
import re
import sys
import tempfile

ALLOWED = {frozenset({"cache.c", "prefetch.c"})}
DEF_RE = re.compile(r"^(?!static\b|extern\b|typedef\b|#)[A-Za-z_][^;]*?\b([A-Za-z_]\w*)\s*(\(|=)")
INC_RE = re.compile(r'^\s*#\s*include\s+"fs/(\w+)\.h"', re.M)
WORD_RE = re.compile(r"[A-Za-z_]\w*")


def strip_c(text):
    """text with comments, strings and char literals blanked, newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text[i] in "\"'":
            q, j = text[i], i + 1
            while j < n and text[j] != q and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
        else:
            out.append(text[i])
            i += 1
            continue
        out.append(re.sub(r"[^\n]", " ", text[i:j]))
        i = j
    return "".join(out)


def defined(line):
    """The name a file-level line defines (a function, a variable), else None."""
    m = DEF_RE.match(line)
    if not m or (m.group(2) == "(" and line.rstrip().endswith(";")):
        return None
    return m.group(1)


def ties(folder, files):
    """{(a, b): count} of uses in a of what b defines, includes counted as uses."""
    src = {}
    for f in files:
        with open(os.path.join(folder, f), encoding="utf-8") as fh:
            src[f] = fh.read()
    code = {f: strip_c(t) for f, t in src.items()}
    owner = {}
    for f, t in code.items():
        for line in t.splitlines():
            name = defined(line)
            if name:
                owner.setdefault(name, f)
    out = {}
    for f, t in code.items():
        defs = {n for n, o in owner.items() if o == f}
        for line in t.splitlines():
            skip = defined(line)
            for w in WORD_RE.findall(line):
                o = owner.get(w)
                if o and o != f and w not in defs and w != skip:
                    out[(f, o)] = out.get((f, o), 0) + 1
        for h in INC_RE.findall(src[f]):
            o = h + ".c"
            if o in src and o != f:
                out[(f, o)] = out.get((f, o), 0) + 1
    return out


def circles(nodes, edges):
    """The strongly connected sets of more than one file (Tarjan)."""
    succ = {n: sorted(b for (a, b) in edges if a == n) for n in nodes}
    index, low, stack, on, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(frozenset(comp))

    for n in sorted(nodes):
        if n not in index:
            visit(n)
    return found


def self_check():
    """The scanner on made-up files: a.c calls b.c, b.c calls a.c, c.c includes fs/a.h."""
    files = {
        "a.c": '/* b_thing() in a comment */\nint a_fn(int x)\n{\n\treturn b_fn(x) + 1;\n}\n',
        "b.c": 'static int helper(void);\nint b_var = 3;\nint b_fn(int x)\n{\n'
               '\tconst char *s = "c_fn()";\n\treturn x ? a_fn(x - 1) : b_var;\n}\n',
        "c.c": '#include "fs/a.h"\nvoid c_fn(void)\n{\n\t(void)b_var;\n}\n',
    }
    with tempfile.TemporaryDirectory() as d:
        for name, text in files.items():
            with open(os.path.join(d, name), "w", encoding="utf-8") as fh:
                fh.write(text)
        t = ties(d, sorted(files))
    want = {("a.c", "b.c"): 1, ("b.c", "a.c"): 1, ("c.c", "a.c"): 1, ("c.c", "b.c"): 1}
    if t != want:
        print(f"fs_ties: self-check: got {t}, want {want}")
        return False
    got = circles(set(files), t)
    if got != [frozenset({"a.c", "b.c"})]:
        print(f"fs_ties: self-check: circles {got}")
        return False
    return True


def daemon_files(fs_dir):
    """The .c files of fs/ (the daemon: every one is part of spritefs)."""
    return sorted(f for f in os.listdir(fs_dir) if f.endswith(".c"))


def not_daemon(fs_dir, files):
    """The .c files of fs/ that fs/meson.build does not build into spritefs, and
    the programs other than spritefs it builds: fs/ holds the daemon only."""
    with open(os.path.join(fs_dir, "meson.build"), encoding="utf-8") as fh:
        build = fh.read()
    built = set(re.findall(r"'([\w.-]+\.c)'", build))
    programs = set(re.findall(r"executable\(\s*'([\w.-]+)'", build))
    return sorted(set(files) - built), sorted(programs - {"spritefs"})


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(__file__))
    if not self_check():
        return 1
    fs_dir = os.path.join(root, "fs")
    files = daemon_files(fs_dir)
    t = ties(fs_dir, files)
    if not t:
        print("fs_ties: no ties found in fs/: the scanner is broken")
        return 1
    for (a, b), n in sorted(t.items()):
        print(f"{a:>14} -> {b:<14} {n:4d}")
    bad = 0
    loose, others = not_daemon(fs_dir, files)
    for f in loose:
        print(f"fs_ties: fs/{f} is not part of spritefs: fs/ holds the daemon only")
        bad = 1
    for p in others:
        print(f"fs_ties: fs/meson.build builds {p}: give it a folder of its own (as pack/)")
        bad = 1
    for c in circles(set(files), t):
        names = " <-> ".join(sorted(c))
        if c in ALLOWED:
            print(f"circle (allowed: submit/complete): {names}")
        else:
            print(f"fs_ties: circle {names}: move what the lower file needs below it")
            bad = 1
    return bad


if __name__ == "__main__":
    sys.exit(main())
