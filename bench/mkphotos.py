#!/usr/bin/python3
"""mkphotos.py - a seeded folder of photo-like JPEGs for spritefs-bench.

Writes OUT/train/<class>/NNNNN.jpg and OUT/test/<class>/NNNNN.jpg (--eval-name): images of
every size and aspect ratio (each side drawn from 200-640 px; with --sizes imagenet, ImageNet's
shapes: the long side mostly 500 px, 4:3 and 3:2 most often, about 500x375 on average; with
--sizes camera, a phone or camera's: 2-12 megapixels, 4:3, 3:2 or 16:9, 7 MP on average), JPEG
quality 90, 4:2:0, as a camera folder would hold. Each class is a learnable pattern:
an ellipse of the class's hue, at a random place, size and tilt, over a
smooth random background with noise, so a model must find the object, not
read a pixel. The same --seed gives the same bytes (numpy's PCG64 and PIL's
encoder). Camera photos take about half a second each to make: each image draws from its
own generator (PCG64 of [seed, index]) and --jobs processes share the work, so the bytes do
not depend on --jobs. Run with Debian's /usr/bin/python3 (python3-numpy, python3-pil).
"""
import argparse
import os
import sys


# ImageNet's shapes: most images are 500 px on the long side, 4:3 or 3:2, landscape
ASPECTS = ((4 / 3, 0.55), (3 / 2, 0.2), (1.0, 0.1), (5 / 4, 0.1), (16 / 9, 0.05))


def imagenet_shape(rng):
    """(h, w) of an ImageNet-like photo: about 500x375 on average."""
    long_ = 500 if rng.uniform() < 0.7 else int(rng.integers(300, 801))
    aspect = ASPECTS[int(rng.choice(len(ASPECTS), p=[p for _, p in ASPECTS]))][0]
    short = max(8, int(round(long_ / aspect)))
    return (short, long_) if rng.uniform() < 0.9 else (long_, short)


# a phone or camera's: 4:3 most often, then 3:2 (DSLRs) and 16:9
CAMERA_ASPECTS = ((4 / 3, 0.6), (3 / 2, 0.25), (16 / 9, 0.15))


def camera_shape(rng):
    """(h, w) of a camera photo: 2-12 megapixels, mostly landscape."""
    px = rng.uniform(2e6, 12e6)
    aspect = CAMERA_ASPECTS[int(rng.choice(len(CAMERA_ASPECTS), p=[p for _, p in CAMERA_ASPECTS]))][0]
    long_, short = int(round((px * aspect) ** 0.5)), int(round((px / aspect) ** 0.5))
    return (short, long_) if rng.uniform() < 0.8 else (long_, short)


def draw(rng, h, w, k, classes, amp, small=False):
    """One photo as a PIL image: the class's ellipse over a smooth, noisy background. small:
    the noise drawn as int16 (a camera photo's as int64 would take 0.3 GB; range and imagenet
    keep int64, the stream their bytes came from)."""
    import numpy as np
    from PIL import Image, ImageDraw
    # background: a coarse random field, upscaled (smooth), plus noise
    coarse = rng.integers(40, 200, size=(4, 4, 3), dtype=np.uint8)
    bg = Image.fromarray(coarse, "RGB").resize((w, h), Image.BILINEAR)
    img = np.asarray(bg, dtype=np.int16) + rng.integers(-amp, amp + 1, size=(h, w, 3),
                                                          dtype=np.int16 if small else np.int64)
    im = Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")
    # the object: an ellipse of the class's hue covering 30-70% of the short side
    hue = int(255 * k / classes)
    color = Image.new("HSV", (1, 1), (hue, 220, 230)).convert("RGB").getpixel((0, 0))
    s = min(h, w)
    eh = int(s * rng.uniform(0.3, 0.7))
    ew = int(eh * rng.uniform(0.6, 1.6))
    cy = int(rng.integers(eh // 2, max(eh // 2 + 1, h - eh // 2)))
    cx = int(rng.integers(min(ew // 2, w // 2), max(min(ew // 2, w // 2) + 1, w - ew // 2)))
    d = ImageDraw.Draw(im)
    d.ellipse([cx - ew // 2, cy - eh // 2, cx + ew // 2, cy + eh // 2], fill=color)
    return im


def camera_one(job):
    """Photo I of a --sizes camera folder, written to PATH: its own generator."""
    import numpy as np
    seed, i, k, classes, path = job
    rng = np.random.Generator(np.random.PCG64([seed, i]))
    h, w = camera_shape(rng)
    draw(rng, h, w, k, classes, 12, small=True).save(path, "JPEG", quality=90, subsampling=2)
    return h * w


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the folder to write (must not exist)")
    ap.add_argument("--count", type=int, default=3000, help="images in all (default 3000)")
    ap.add_argument("--classes", type=int, default=5, help="classes (default 5)")
    ap.add_argument("--val", type=float, default=0.2, help="share held out (default 0.2)")
    ap.add_argument("--eval-name", default="test", help="the held-out split's folder (test)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--min-side", type=int, default=200)
    ap.add_argument("--max-side", type=int, default=640)
    ap.add_argument("--sizes", choices=("range", "imagenet", "camera"), default="range",
                    help="range: each side from --min-side to --max-side; imagenet: "
                         "ImageNet-like shapes (about 500x375 on average); camera: 2-12 "
                         "megapixels (7 on average)")
    ap.add_argument("--jobs", type=int, default=1, help="processes (--sizes camera only; default 1)")
    a = ap.parse_args()
    if a.count < 2 * a.classes or not 2 <= a.classes <= 64 or not 0 < a.val < 1:
        ap.error("--count must be at least 2 x --classes, --classes 2-64, --val in (0, 1)")
    if not 1 <= a.jobs <= 256:
        ap.error("--jobs: 1 to 256")
    if not 8 <= a.min_side <= a.max_side <= 8192:
        ap.error("--min-side and --max-side: 8 <= min <= max <= 8192")
    try:
        import importlib
        for mod in ("PIL.Image", "PIL.ImageDraw"):  # draw() imports them where it runs
            importlib.import_module(mod)
        import numpy as np
    except ImportError as e:
        print(f"mkphotos: needs numpy and PIL ({e}); run with /usr/bin/python3", file=sys.stderr)
        return 1
    if os.path.exists(a.out):
        print(f"mkphotos: {a.out} exists; give a new folder", file=sys.stderr)
        return 1
    rng = np.random.Generator(np.random.PCG64(a.seed))
    names = [f"c{k:02d}" for k in range(a.classes)]
    for split in ("train", a.eval_name):
        for n in names:
            os.makedirs(os.path.join(a.out, split, n))
    nval = max(a.classes, int(round(a.count * a.val)))
    step = max(1, a.count // 20)

    def path_of(i):
        split = a.eval_name if i >= a.count - nval else "train"
        return os.path.join(a.out, split, names[i % a.classes], f"{i:05d}.jpg")

    if a.sizes == "camera":
        import multiprocessing
        jobs = [(a.seed, i, i % a.classes, a.classes, path_of(i)) for i in range(a.count)]
        with multiprocessing.Pool(a.jobs) as pool:
            for done, _ in enumerate(pool.imap(camera_one, jobs, chunksize=1), 1):
                if done % step == 0:
                    print(f"mkphotos: {done}/{a.count}", file=sys.stderr, flush=True)
    for i in range(a.count if a.sizes != "camera" else 0):
        if a.sizes == "imagenet":
            h, w = imagenet_shape(rng)
        else:
            h = int(rng.integers(a.min_side, a.max_side + 1))
            w = int(rng.integers(a.min_side, a.max_side + 1))
        # ImageNet's JPEGs hold more texture (about 110 KB each): more noise
        im = draw(rng, h, w, i % a.classes, a.classes, 30 if a.sizes == "imagenet" else 12)
        im.save(path_of(i), "JPEG", quality=90, subsampling=2)
        if (i + 1) % step == 0:
            print(f"mkphotos: {i + 1}/{a.count}", file=sys.stderr, flush=True)
    print(f"mkphotos: {a.count} JPEGs in {a.out} ({a.count - nval} train, {nval} {a.eval_name}, "
          f"{a.classes} classes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
