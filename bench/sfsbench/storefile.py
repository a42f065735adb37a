"""storefile.py - what the bench needs from a sprite store file's header and path table.

The bench packs the tree it prepared, and the packer leaves out the files it
cannot use (truncated, not an image, SVG ...). The other media - the tree on
tmpfs and on the disk, read by spritefs-readbench, torchvision's ImageFolder
and hntrain - must read exactly the samples the store holds, so the bench
takes the store's own record of them: the path table (docs/FORMAT.md, "Path
table"), one source path per sample, relative to the packed folder. It also
gives the sheet count, by which report.py decides whether a store is large
enough to measure the reading targets. Standard library only; offsets and
sizes are checked against the file, the checksums are left to the readers
that run afterwards (spritefs, readbench), which check them anyway.
"""
import os
import re
import struct

HEADER = 4096
MAGIC = b"SPRITES\0"


class StoreError(ValueError):
    pass


def header(path):
    """The fields the bench uses: tile, sheet_tiles, nsheets, splits [(name, count)],
    samples, paths (offset, size), file_size."""
    with open(path, "rb") as f:
        h = f.read(HEADER)
    if len(h) < HEADER or h[:8] != MAGIC:
        raise StoreError(f"{path}: not a sprite store")
    version, _, th, tw, tc, sheet_tiles, _, nsplits, nsheets = struct.unpack_from("<9I", h, 8)
    if version < 1 or not 1 <= nsplits <= 8:
        raise StoreError(f"{path}: bad header (version {version}, {nsplits} splits)")
    splits = []
    for k in range(nsplits):
        name, count = struct.unpack_from("<16sQ", h, 168 + 32 * k)
        splits.append((name.split(b"\0")[0].decode("utf-8", "replace"), count))
    paths_offset, paths_size = struct.unpack_from("<QQ", h, 464) if version >= 3 else (0, 0)
    return {"version": version, "tile": (th, tw, tc), "sheet_tiles": sheet_tiles, "nsheets": nsheets,
            "splits": splits, "samples": sum(c for _, c in splits),
            "paths": (paths_offset, paths_size), "file_size": os.path.getsize(path)}


def paths(path, h=None):
    """The source path of every sample, in store order (split by split), or None where the
    store has no path table (version 2, or written from data without paths)."""
    h = h or header(path)
    off, size = h["paths"]
    n = h["samples"]
    if not off:
        return None
    if size < 8 * (n + 1) or off + size > h["file_size"]:
        raise StoreError(f"{path}: the path table lies outside the file")
    with open(path, "rb") as f:
        f.seek(off)
        buf = f.read(size)
    offs = struct.unpack_from(f"<{n + 1}Q", buf, 0)
    strings = buf[8 * (n + 1):]
    if offs[0] != 0 or offs[n] != len(strings):
        raise StoreError(f"{path}: bad path table (offsets do not cover the strings)")
    out = []
    for i in range(n):
        a, b = offs[i], offs[i + 1]
        if not a < b or strings[b - 1] != 0:
            raise StoreError(f"{path}: bad path table at sample {i}")
        out.append(strings[a:b - 1].decode("utf-8", "surrogateescape"))
    return out


def prune_tree(tree, kept):
    """Remove from TREE (the bench's own copy) every file whose path relative to it is not in
    KEPT: what the packer skipped or ignored, and names it passed over ('.'-files). Empty
    class folders stay. Returns the removed paths, relative, sorted."""
    keep = set(kept)
    gone = []
    for root, _, files in os.walk(tree):
        for name in files:
            p = os.path.join(root, name)
            rel = os.path.relpath(p, tree)
            # the path table holds a byte below 0x20 as '?'
            if re.sub(r"[\x00-\x1f]", "?", rel) not in keep:
                os.remove(p)
                gone.append(rel)
    return sorted(gone)


def kept_files(b, store, photos, reader):
    """The photos of the folder PHOTOS that STORE holds, by its path table: a folder read in
    place holds files the packer skipped, and READER (who reads the folder) must read what
    the packer kept. The train split's go to logs/kept-train.txt (a --files list); returns
    (files, that list's path). Dies with a clear message on an unreadable store."""
    try:
        kept = paths(store)
    except (OSError, StoreError) as e:
        b.die(f"cannot read the store the bench packed: {e}")
    if kept is None:
        b.die("the store has no path table (spritefs-pack too old?)")
    files = [os.path.join(photos, p) for p in kept]
    found = sum(len(fs) for _, _, fs in os.walk(photos))
    if found > len(files):
        b.note(f"{found - len(files)} of the {found} files in {photos} are not in the store (the "
               f"packer skipped or ignored them: see logs/pack-photos.log): {reader} reads the store's "
               f"{len(files)} photos only")
    listed = b.path("logs", "kept-train.txt")
    with open(listed, "w", encoding="utf-8", errors="surrogateescape") as f:
        f.writelines(p + "\n" for p in files if p.startswith(f"{photos}/train/"))
    return files, listed
