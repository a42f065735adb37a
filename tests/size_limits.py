#!/usr/bin/python3
"""size_limits.py - the tree's size rules, checked: no source file over 900
lines and no C function over 150 lines, outside tests/.

A file that grows past the limit is a file holding more than one concept, and
a function past it one that nobody reads whole; STYLE.md asks for neither, and
this test makes the rule hold rather than hope. C, CUDA and headers are read
for functions with a small scanner, not a parser: it drops comments, strings
and character literals, then takes every brace opened at file level right
after a ")" (a function body; a struct, an enum or an initializer follows
something else) and counts the lines from that brace to its match. Every
other source (Python, shell, meson, a program file that starts with "#!")
counts for the file rule only.

Usage: size_limits.py [ROOT]   (ROOT: the source tree, default this file's
parent folder). Prints each offender as "path:line: what" and exits 1 when
there is one, 0 when there is none.
"""
import os
import re
import sys

MAX_FILE_LINES = 900
MAX_FUNC_LINES = 150
C_EXT = (".c", ".h", ".cu", ".cuh")
OTHER_EXT = (".py", ".sh", ".build")
SKIP_DIRS = {"tests", ".git", "subprojects", "__pycache__"}


def strip_c(text):
    """text with comments, strings and char literals blanked, newlines kept."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1:j - 1]) + c)
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def is_script(path, name):
    """A program without an ending (bench/spritefs-bench, run): it starts with "#!"."""
    if "." in name or not os.access(path, os.X_OK):
        return False
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return False


def functions(text):
    """(name, first line, line count) of every function body in C text."""
    s = strip_c(text)
    # preprocessor lines (macros hold braces of their own) blanked, continuations too
    s = re.sub(r"(?m)^[ \t]*#(?:[^\n]*\\\n)*[^\n]*", lambda m: re.sub(r"[^\n]", " ", m.group(0)), s)
    found = []
    depth, line = 0, 1
    start = None
    for i, c in enumerate(s):
        if c == "\n":
            line += 1
        elif c == "{":
            if depth == 0:
                before = s[:i].rstrip()
                # "f(args)" or "f(args) __attribute__((...))" or "f(args) const"
                m = re.search(r"([A-Za-z_]\w*)\s*\((?:[^()]|\([^()]*\))*\)\s*(?:const\s*)?$", before)
                start = (m.group(1), line) if m and m.group(1) not in ("if", "for", "while", "switch") else None
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0 and start:
                found.append((start[0], start[1], line - start[1] + 1))
                start = None
            depth = max(depth, 0)
    return found


def self_check():
    """The scanner on made-up C: what it must find, and what it must pass over."""
    body = "\n".join(["\tx++; /* { */ s = \"}\"; c = '{';"] * 149)
    text = (
        "struct s {\n\tint a;\n};\n"
        "static int t[] = {\n1,\n2\n};\n"
        "#define M(x) { x }\n"
        "static int long_one(int a, void (*f)(int))\n{\n" + body + "\n}\n"
        "int short_one(void) __attribute__((cold));\n"
        "int short_one(void)\n{\n\tif (1) {\n\t}\n\treturn 0;\n}\n"
    )
    got = functions(text)
    want = [("long_one", 10, 151), ("short_one", 163, 5)]
    if got != want:
        print(f"size_limits: the scanner read {got}, not {want}")
        return False
    return True


def main():
    if not self_check():
        return 1
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    bad = []
    nfiles = nfuncs = 0
    for top, dirs, names in os.walk(root):
        rel_top = os.path.relpath(top, root)
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("build") and not d.startswith("."))
        for name in sorted(names):
            path = os.path.join(top, name)
            rel = os.path.normpath(os.path.join(rel_top, name))
            is_c = name.endswith(C_EXT)
            if not is_c and not name.endswith(OTHER_EXT) and not is_script(path, name):
                continue
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read()
            except OSError as e:
                bad.append(f"{rel}:1: cannot read: {e.strerror}")
                continue
            nfiles += 1
            lines = text.count("\n") + (not text.endswith("\n") and bool(text))
            if lines > MAX_FILE_LINES:
                bad.append(f"{rel}:1: {lines} lines, more than {MAX_FILE_LINES}: split it along a seam")
            if is_c:
                for fn, at, n in functions(text):
                    nfuncs += 1
                    if n > MAX_FUNC_LINES:
                        bad.append(f"{rel}:{at}: {fn}() is {n} lines, more than {MAX_FUNC_LINES}")
    for b in bad:
        print(b)
    print(f"size_limits: {nfiles} files, {nfuncs} C functions read; {len(bad)} over the limits")
    if nfuncs == 0:
        print("size_limits: no C function found: the scanner or ROOT is wrong")
        return 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
