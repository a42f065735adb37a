#!/usr/bin/python3
"""amp_model - what --amp's gradients may differ by, from a model of its arithmetic.

test_gpu_layers compares the gpu backend's --amp gradients with the cpu
backend's fp32 ones. This script models the plugin's amp arithmetic
(cuda/layers.c, cuda/kernels*.cu), for fp16 and for bf16, on the CPU with
PyTorch and measures how far an amp gradient lies from the fp32 one when
nothing is wrong, on the test's batch of 6 random tiles:

  * conv: inputs and weights rounded to 16 bits, products summed in fp32,
    the output rounded to 16 bits (cuDNN with 16-bit tensors), then the
    fp32 bias; backward: x and dy rounded, dw and dx rounded;
  * dense: inputs and weights rounded, the output and dw in fp32
    (cublasGemmEx, fp32 C); dy rounded;
  * ReLU, max pooling, batchnorm (its sums in double), a residual block's
    add, global average pooling, the loss and bias gradients in fp32; fp16
    with a loss scale, bf16 without.

The built-in cnn (c32k3-r-m2-c64k3-r-m2-d128-r-d10, 28x28 tiles), 100
batches; findings, asserted below:
  1. with the fp32 run's ReLU masks and max-pool choices, every gradient
     is within 8 unit roundoffs of its tensor's largest element (fp16
     4e-3, 2.0e-3 measured; bf16 3.2e-2, 1.6e-2 measured): rounding alone;
  2. with its own masks and choices, near-ties flip (the rounding moves a
     value across 0 or past its pooling neighbour) and move whole
     contributions: single elements then differ by 20% (fp16) to 47%
     (bf16) of the tensor's largest, many with the sign changed, while the
     gradient's direction holds: cosine per tensor at least 0.998 (fp16)
     and 0.973 (bf16) over 100 random batches, and per row (one filter's
     or one unit's weights) holding at least half the largest row's norm
     at least 0.98; the batch's loss within 4e-4 (fp16) and 4.2e-3 (bf16);
  3. real faults do not pass: a filter with the wrong sign has a row
     cosine of -1, filters in the wrong order a tensor cosine of 0.16.
So test_gpu_layers checks amp gradients by cosine: per tensor at least
0.99 for fp16 and 0.95 for bf16, per such row at least 0.9; the
elementwise bound stays for fp32.

The residual models test_gpu_layers has, built as trainer/model.c builds
them (save and add are layers, numbered as there), with hntrain's He
initialisation plus the test's noise: res4-res6s2p
(c4k3p1nb-bn-r-res4-res6s2p-gap, 1x8x8), res4x2-bot2s2p
(c4k3s2p1nb-bn-r-m3s2p1-res4x2-bot2s2p-gap, 2x11x11) and resnet-fm
(1x28x28); fp16's loss scale from 65536, halved on each overflow as the
test's retried steps do. Findings, from `amp_model.py --batches 2000`
(2000 batches each, 7 minutes here; the test runs 300, 300 and 200):
  4. rounding alone keeps resnet-fm's gradients within 16 unit roundoffs
     of their tensor's largest (fp16 7.6e-3, bf16 3.9e-2 measured), but
     where a batchnorm makes the loss blind to a scale the gradient is
     near zero and rounding alone turns it round (res4x2-bot2s2p's layer 22
     gamma gets [a, -a]: scaling both channels changes nothing after the
     next conv's batchnorm): with the fp32 run's routing, cosines down to
     0.985 (res4-res6s2p, bf16) and -0.996 (res4x2-bot2s2p, bf16);
  5. flips weigh far more than in the cnn: the batchnorms normalise 24 to
     96 values a channel, and one flipped ReLU in res4x2-bot2s2p's 2x2
     bottleneck moves every gradient below it (one batch: fp16 cosine of
     the whole model 0.26). Worst cosine per tensor / per row / over all
     trained parameters at once, 2000 batches:
       res4-res6s2p    fp16 -0.82 / 0.865 / 0.990   bf16 -0.79 / 0.481 / 0.964
       res4x2-bot2s2p  fp16 -1.00 / -0.36 / 0.258   bf16 -1.00 / -1.00 / 0.564
       resnet-fm       fp16 0.988 / 0.759 / 0.997   bf16 0.929 / 0.733 / 0.986
     and the batch's loss within 3.6e-3 (fp16) and 1.3e-2 (bf16);
  6. the H100's two bf16 failures under the cnn's bounds, res4x2-bot2s2p's
     layer 22 bias at 0.892 and a resnet-fm layer 23 row at 0.862 (cuDNN
     9.19; 9.14 gives the same), are rounding: 6.4% and 9.3% of correct
     batches go as low; and the H100's resnet-fm whole-model cosines,
     0.9990 (fp16) and 0.9913 (bf16), are the model's medians (0.9989 and
     0.9910 over the test's 200 batches).
So test_gpu_layers holds residual models to bounds per model (amp_bounds,
RES_BOUNDS here), each twice as far from 1 as that worst, rounded down to
0.01, -1 where none holds: per tensor / row / whole model
       res4-res6s2p    fp16 -1 / 0.73 / 0.97      bf16 -1 / -0.04 / 0.92
       res4x2-bot2s2p  fp16 -1 / -1 / -0.48       bf16 -1 / -1 / 0.12
       resnet-fm       fp16 0.97 / 0.51 / 0.99    bf16 0.85 / 0.46 / 0.97
A filter of the wrong sign fails the row bound (about -1) where there is
one, filters out of order the tensor or row bound where either is 0.5 or
more (asserted below); res4x2-bot2s2p at 6 samples has no direction a
rounding cannot turn, so its amp check is in effect the loss, finite
values and no skipped step. Skips (77) without PyTorch.
"""
import sys

try:
    import torch
    import torch.nn.functional as F
    from torch.nn.grad import conv2d_input, conv2d_weight
except ImportError:
    print("SKIP: no PyTorch (python3-torch)")
    sys.exit(77)

N = 6  # test_gpu_layers' NB


def grads(seed, amp, scale=1024.0, route=None, dtype=torch.float16):
    """The cnn's weight and bias gradients on one batch, its routing, its summed loss."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (N, 1, 28, 28), generator=g).float() / 255
    lab = torch.randint(0, 10, (N,), generator=g)
    w1 = torch.randn(32, 1, 3, 3, generator=g) * (2 / 9) ** 0.5
    w2 = torch.randn(64, 32, 3, 3, generator=g) * (2 / 288) ** 0.5
    w3 = torch.randn(128, 1600, generator=g) * (2 / 1600) ** 0.5
    w4 = torch.randn(10, 128, generator=g) * (2 / 128) ** 0.5
    b1, b2, b3, b4 = (torch.randn(k, generator=g) * 0.05 for k in (32, 64, 128, 10))
    q = (lambda t: t.to(dtype).float()) if amp else (lambda t: t)
    s = scale if amp and dtype == torch.float16 else 1.0  # bf16: no loss scale

    def relu_pool(y, k):
        m = route[2 * k] if route else (y > 0).float()
        r = y * m
        _, idx = F.max_pool2d(r, 2, return_indices=True)
        if route:
            idx = route[2 * k + 1]
        p = r.flatten(2).gather(2, idx.flatten(2)).view(idx.shape)
        return r, p, m, idx

    y1 = q(F.conv2d(q(x), q(w1))) + b1[None, :, None, None]
    r1, p1, m1, i1 = relu_pool(y1, 0)
    y2 = q(F.conv2d(q(p1), q(w2))) + b2[None, :, None, None]
    r2, p2, m2, i2 = relu_pool(y2, 1)
    f = p2.reshape(N, -1)
    y3 = q(f) @ q(w3).T + b3
    m3 = route[4] if route else (y3 > 0).float()
    r3 = y3 * m3
    y4 = q(r3) @ q(w4).T + b4
    loss = float(-torch.log_softmax(y4, 1)[range(N), lab].sum())
    d4 = torch.softmax(y4, 1)
    d4[range(N), lab] -= 1
    d4 *= s / N
    gw4, gb4 = q(d4).T @ q(r3), d4.sum(0)
    d3 = (q(d4) @ q(w4)) * m3
    gw3, gb3 = q(d3).T @ q(f), d3.sum(0)
    d2 = F.max_unpool2d((q(d3) @ q(w3)).reshape(p2.shape), i2, 2, output_size=r2.shape[2:]) * m2
    gw2, gb2 = q(conv2d_weight(q(p1), w2.shape, q(d2))), d2.sum((0, 2, 3))
    dp1 = q(conv2d_input(p1.shape, q(w2), q(d2)))
    d1 = F.max_unpool2d(dp1, i1, 2, output_size=r1.shape[2:]) * m1
    gw1, gb1 = q(conv2d_weight(q(x), w1.shape, q(d1))), d1.sum((0, 2, 3))
    out = [t / s for t in (gw1, gb1, gw2, gb2, gw3, gb3, gw4, gb4)]
    return out, (m1, i1, m2, i2, m3), loss


NAMES = ["0 weights", "0 bias", "3 weights", "3 bias", "6 weights", "6 bias", "8 weights", "8 bias"]


def rel(a, b):
    return ((a - b).abs().max() / a.abs().max()).item()


def cos(a, b):
    return F.cosine_similarity(a.flatten().double(), b.flatten().double(), 0).item()


def row_cos(a, b):
    """Lowest cosine over the rows (a filter's, a unit's weights) with >= half the top norm."""
    ra, rb = a.reshape(a.shape[0], -1).double(), b.reshape(b.shape[0], -1).double()
    n = ra.norm(dim=1)
    return F.cosine_similarity(ra, rb, 1)[n >= 0.5 * n.max()].min().item()


# per kind: rounding alone (same routing), the least tensor cosine, the least row cosine;
# test_gpu_layers' bounds (compare_amp) are 0.99 / 0.95 per tensor and 0.9 per row
BOUNDS = {"fp16": (torch.float16, 4e-3, 0.995, 0.95), "bf16": (torch.bfloat16, 3.2e-2, 0.965, 0.95)}
for kind, (dt, same_max, cos_min, row_min) in BOUNDS.items():
    worst_same, worst_rel, worst_cos, worst_row, worst_loss, flips = 0.0, 0.0, 1.0, 1.0, 0.0, 0
    for seed in range(100):
        ref, route, loss = grads(seed, amp=False)
        same, _, _ = grads(seed, amp=True, route=route, dtype=dt)
        own, _, own_loss = grads(seed, amp=True, dtype=dt)
        worst_loss = max(worst_loss, abs(own_loss - loss) / loss)
        assert all(torch.isfinite(t).all() for t in own), f"{kind} batch {seed}: overflow"
        for r, a, o in zip(ref, same, own):
            worst_same = max(worst_same, rel(r, a))
            worst_rel = max(worst_rel, rel(r, o))
            worst_cos = min(worst_cos, cos(r, o))
            if r.dim() > 1:
                worst_row = min(worst_row, row_cos(r, o))
            flips += int(((r.sign() != o.sign()) & (r.abs() > 0.01 * r.abs().max())).sum())
    print(f"{kind}, 100 batches of {N}: same routing max rel err {worst_same:.2e}; own routing "
          f"max rel err {worst_rel:.3f}, {flips} sign flips of elements over 1% of their "
          f"tensor's largest, least cosine {worst_cos:.5f} per tensor, {worst_row:.4f} per row; "
          f"loss rel err {worst_loss:.1e}")
    assert worst_loss <= 1e-2, f"{kind}: the loss is {worst_loss:.1e} off (test_gpu_layers: 2e-2)"
    assert worst_same <= same_max, f"{kind}: rounding alone gives {worst_same:.2e} > {same_max}"
    assert worst_cos >= cos_min, f"{kind}: a correct gradient has cosine {worst_cos:.5f}"
    assert worst_row >= row_min, f"{kind}: a correct gradient has a row of cosine {worst_row:.4f}"

ref, _, _ = grads(0, amp=False)
bad, _, _ = grads(0, amp=True, dtype=torch.bfloat16)
big = ref[0].reshape(32, -1).norm(dim=1).argmax()
bad[0][big] = -bad[0][big]  # the first layer's largest filter gradient with the wrong sign
print(f"one first-layer filter with the wrong sign: cosine {cos(ref[0], bad[0]):.4f} per "
      f"tensor, {row_cos(ref[0], bad[0]):.4f} per row")
assert row_cos(ref[0], bad[0]) < 0.9, "a sign fault in one filter passes the row check"
bad, _, _ = grads(0, amp=True, dtype=torch.bfloat16)
bad[2] = bad[2][torch.randperm(64, generator=torch.Generator().manual_seed(1))]
print(f"the second layer's filters shuffled: cosine {cos(ref[2], bad[2]):.4f} per tensor")
assert cos(ref[2], bad[2]) < 0.95, "shuffled filters pass the tensor check"

# ---- residual models: the plugin's layers one by one, autograd for the wiring ----

PRESETS = {"resnet-fm": "c32k3p1nb-bn-r-m2-res32-res64s2p-res128s2p-gap"}


def num(s, at):
    """The integer at s[at:] and the index after it."""
    end = at
    while end < len(s) and s[end].isdigit():
        end += 1
    return int(s[at:end]), end


def build(spec, c, h, w, classes):
    """trainer/model.c's layer list for the specs used here (conv, bn, r, m, gap, d, res,
    bot): dicts with the kind, the input and output shapes and the kind's fields; numbered as
    hntrain numbers them (save and add are layers), so that a layer here is the test's."""
    layers, shape = [], [c, h, w]

    def add(kind, **kw):
        ins = list(layers[kw["frm"] - 1]["outs"] if kw.get("frm") else shape)
        ci, hi, wi = ins
        if kind in ("conv", "pool"):
            k, s, p = kw["k"], kw["s"], kw["p"]
            shape[:] = [kw.get("out", ci), (hi + 2 * p - k) // s + 1, (wi + 2 * p - k) // s + 1]
        elif kind in ("gap", "dense"):
            shape[:] = [kw.get("out", ci), 1, 1]
        layers.append(dict(kind=kind, ins=ins, outs=list(shape), **kw))

    def block(bot, width, stride, proj):
        """add_block: save, (1x1,) 3x3, (1x1) convs with bn, ReLUs between, the projection
        (a 1x1 conv of the save's output and a bn), the add, a ReLU."""
        save = len(layers)
        add("save")
        ks, cs, ss = ([1, 3, 1], [width, width, 4 * width], [1, stride, 1]) if bot else \
            ([3, 3], [width, width], [stride, 1])
        for j, (k, co, s) in enumerate(zip(ks, cs, ss)):
            add("conv", out=co, k=k, s=s, p=k // 2, bias=False, frm=0)
            add("bn")
            if j + 1 < len(ks):
                add("relu")
        short = save + 1
        if proj:
            short = len(layers)
            add("conv", out=cs[-1], k=1, s=stride, p=0, bias=False, frm=save + 1)
            add("bn")
        add("add", short=short)
        add("relu")

    for tok in PRESETS.get(spec, spec).split("-"):
        if tok in ("bn", "r", "gap"):
            add({"bn": "bn", "r": "relu", "gap": "gap"}[tok])
        elif tok[:3] in ("res", "bot"):
            width, at = num(tok, 3)
            opt = {"s": 1, "p": 0, "x": 1}
            while at < len(tok):
                key = tok[at]
                opt[key], at = (1, at + 1) if key == "p" else num(tok, at + 1)
            for j in range(opt["x"]):
                block(tok[0] == "b", width, opt["s"] if j == 0 else 1, opt["p"] and j == 0)
        elif tok[0] in "cm":
            k, at = num(tok, 1)
            out = k
            if tok[0] == "c":
                k, at = num(tok, at + 1)
            opt = {"s": 1 if tok[0] == "c" else k, "p": 0}
            while at < len(tok) and tok[at] in "sp":
                opt[tok[at]], at = num(tok, at + 1)
            if tok[0] == "c":
                add("conv", out=out, k=k, bias=not tok.endswith("nb"), frm=0, **opt)
            else:
                add("pool", k=k, **opt)
        elif tok[0] == "d":
            add("dense", out=num(tok, 1)[0], bias=True)
        else:
            raise ValueError(f"amp_model: no model of layer {tok}")
    if layers[-1]["kind"] != "dense" or layers[-1]["out"] != classes:
        add("dense", out=classes, bias=True)
    return layers


def init_params(layers, g):
    """[w, b, running statistics] per layer: hn_model_init_params (He-uniform weights, bias 0;
    bn gamma 1, beta 0, mean 0, var 1) plus test_gpu_layers' U(-0.01, 0.01) on everything."""
    def noise(*shape):
        return (torch.randint(0, 201, shape, generator=g).float() - 100) / 10000

    P = []
    for l in layers:
        if l["kind"] in ("conv", "dense"):
            shape = (l["out"], l["ins"][0], l["k"], l["k"]) if l["kind"] == "conv" else \
                (l["out"], l["ins"][0] * l["ins"][1] * l["ins"][2])
            fan = shape[1] * (l["k"] ** 2 if l["kind"] == "conv" else 1)
            w = (torch.rand(shape, generator=g) * 2 - 1) * (6 / fan) ** 0.5 + noise(*shape)
            P.append([w, noise(l["out"]) if l["bias"] else None, None])
        elif l["kind"] == "bn":
            C = l["ins"][0]
            P.append([1 + noise(C), noise(C), torch.cat([noise(C), 1 + noise(C)])])
        else:
            P.append([None, None, None])
    return P


class QConv(torch.autograd.Function):
    """cu_conv_forward / cu_conv_backward under amp (cuDNN on 16-bit tensors, fp32
    accumulation): x, w and dy rounded; the output, dw and dx rounded too."""

    @staticmethod
    def forward(ctx, x, w, s, p, q):
        ctx.save_for_backward(x, w)
        ctx.s, ctx.p, ctx.q = s, p, q
        return q(F.conv2d(q(x), q(w), stride=s, padding=p))

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        q, s, p, d = ctx.q, ctx.s, ctx.p, ctx.q(dy)
        dw = q(conv2d_weight(q(x), w.shape, d, stride=s, padding=p))
        return q(conv2d_input(x.shape, q(w), d, stride=s, padding=p)), dw, None, None, None


class QDense(torch.autograd.Function):
    """dense_forward / dense_backward under amp (cublasGemmEx, fp32 C): x, w and dy rounded;
    the output, dw and dx in fp32."""

    @staticmethod
    def forward(ctx, x, w, q):
        ctx.save_for_backward(x, w)
        ctx.q = q
        return q(x) @ q(w).T

    @staticmethod
    def backward(ctx, dy):
        x, w = ctx.saved_tensors
        d = ctx.q(dy)
        return d @ ctx.q(w), d.T @ ctx.q(x), None


def net_grads(layers, P, x, lab, q, scale, route):
    """What test_gpu_layers reads after one sgd step (lr 1): per layer [weights, bias, running
    statistics] changes (None where absent), with q the 16-bit rounding (or none) and scale
    the loss scale; batchnorm, ReLU, pooling, the add and the loss in fp32, as kernels.cu has
    them. The routing (ReLU masks, max-pool picks) is replayed from route when given, else
    recorded; returns the changes, the routing and the batch's summed loss."""
    leaves = [[t.clone().requires_grad_() if t is not None and j < 2 else None
               for j, t in enumerate(p)] for p in P]
    rec, it, acts, stats = [], iter(route) if route else None, [x], {}
    for i, l in enumerate(layers):
        a, (w, b, _), k = acts[i], leaves[i], l["kind"]
        if k == "conv":
            y = QConv.apply(acts[l["frm"]] if l["frm"] else a, w, l["s"], l["p"], q)
            y = y if b is None else y + b[None, :, None, None]
        elif k == "dense":
            y = (QDense.apply(a.reshape(a.shape[0], -1), w, q) + b)[:, :, None, None]
        elif k == "bn":
            d = a.detach().double()
            stats[i] = torch.cat([d.mean((0, 2, 3)), d.var((0, 2, 3), unbiased=True)])
            y = F.batch_norm(a, None, None, w, b, training=True, eps=1e-5)
        elif k == "relu":
            m = next(it) if it else (a > 0).float()
            rec.append(m)
            y = a * m
        elif k == "pool":
            _, idx = F.max_pool2d(a, l["k"], l["s"], l["p"], return_indices=True)
            idx = next(it) if it else idx
            rec.append(idx)
            y = a.flatten(2).gather(2, idx.flatten(2)).view(idx.shape)
        elif k == "gap":
            y = a.mean((2, 3), keepdim=True)
        else:  # a save passes X on; the add
            y = a + acts[l["short"]] if k == "add" else a
        acts.append(y)
    loss = F.cross_entropy(acts[-1].reshape(x.shape[0], -1), lab, reduction="sum")
    (loss * (scale / x.shape[0])).backward()
    out = []
    for i, l in enumerate(layers):
        g = [t.grad / scale if t is not None else None for t in leaves[i][:2]]
        # running = 0.9 running + 0.1 batch statistic (HN_BN_MOMENTUM)
        g.append(0.1 * (P[i][2].double() - stats[i]).float() if i in stats else None)
        out.append(g)
    return out, rec, float(loss)


def amp_grads(layers, P, x, lab, dt, route=None):
    """The plugin's: fp16 with the loss scale from 65536 (HN_AMP_INIT_SCALE) halved on each
    overflow, the steps test_gpu_layers repeats; bf16 with none."""
    q = lambda t: t.to(dt).float()
    scale = 65536.0 if dt == torch.float16 else 1.0
    while True:
        out, rec, loss = net_grads(layers, P, x, lab, q, scale, route)
        if all(torch.isfinite(t).all() for g in out for t in g if t is not None):
            return out, rec, loss
        scale /= 2
        assert scale >= 1, "fp16 overflows at every loss scale"


def model_cos(layers, a, b):
    """Cosine over all trained parameters (weights and biases) at once."""
    pick = lambda g: torch.cat([t.flatten() for gl in g for t in gl[:2] if t is not None])
    return cos(pick(a), pick(b))


# spec, tile (c, h, w), classes, batches (--batches N: N each); test_gpu_layers' residual
# shapes with its NB = 6
MORE = int(sys.argv[sys.argv.index("--batches") + 1]) if "--batches" in sys.argv else 0
RES_MODELS = [("c4k3p1nb-bn-r-res4-res6s2p-gap", (1, 8, 8), 5, MORE or 300),
              ("c4k3s2p1nb-bn-r-m3s2p1-res4x2-bot2s2p-gap", (2, 11, 11), 3, MORE or 300),
              ("resnet-fm", (1, 28, 28), 10, MORE or 200)]
# test_gpu_layers' amp_bounds, (fp16, bf16) per tensor, per row, whole model: each twice as far
# from 1 as the worst of 2000 batches here (--batches 2000), rounded down to 0.01; -1: none
RES_BOUNDS = {
    "c4k3p1nb-bn-r-res4-res6s2p-gap": ((-1, -1), (0.73, -0.04), (0.97, 0.92)),
    "c4k3s2p1nb-bn-r-m3s2p1-res4x2-bot2s2p-gap": ((-1, -1), (-1, -1), (-0.48, 0.12)),
    "resnet-fm": ((0.97, 0.85), (0.51, 0.46), (0.99, 0.97)),
}
TENSOR = ("weights", "bias", "running statistics")


def res_measure(spec, tile, classes, batches, kind, dt):
    """Over random batches and weights: the worst tensor, row and whole-model cosines (with
    where), rounding alone's worst, the loss's; and every batch's cosines by tensor."""
    layers = build(spec, *tile, classes)
    w = dict(tensor=(1.0, ""), row=(1.0, ""), model=1.0, same=0.0, same_cos=1.0, loss=0.0)
    by = {"whole": []}
    for seed in range(batches):
        g = torch.Generator().manual_seed(seed)
        P = init_params(layers, g)
        x = torch.randint(0, 256, (N, *tile), generator=g).float() / 255
        lab = torch.randint(0, classes, (N,), generator=g)
        ref, route, loss = net_grads(layers, P, x, lab, lambda t: t, 1.0, None)
        same, _, _ = amp_grads(layers, P, x, lab, dt, route)
        own, _, own_loss = amp_grads(layers, P, x, lab, dt)
        w["loss"] = max(w["loss"], abs(own_loss - loss) / loss)
        by["whole"].append(model_cos(layers, ref, own))
        w["model"] = min(w["model"], by["whole"][-1])
        for i, l in enumerate(layers):
            for t, (r, s, o) in enumerate(zip(ref[i], same[i], own[i])):
                if r is None:
                    continue
                assert torch.isfinite(o).all(), f"{spec} {kind} batch {seed}: overflow"
                w["same"], w["same_cos"] = max(w["same"], rel(r, s)), min(w["same_cos"], cos(r, s))
                where = f"layer {i} {TENSOR[t]}"
                c = cos(r, o)
                by.setdefault(where, []).append(c)
                w["tensor"] = min(w["tensor"], (c, where))
                if t == 0 and l["kind"] in ("conv", "dense") and r.shape[0] >= 2:
                    c = row_cos(r, o)
                    by.setdefault(f"layer {i} rows", []).append(c)
                    w["row"] = min(w["row"], (c, f"layer {i}"))
    return layers, w, by


def share_at_or_below(v, x):
    return sum(c <= x for c in v) / len(v)


for spec, tile, classes, batches in RES_MODELS:
    for k, (kind, dt) in enumerate((("fp16", torch.float16), ("bf16", torch.bfloat16))):
        layers, w, by = res_measure(spec, tile, classes, batches, kind, dt)
        bt, br, bm = (b[k] for b in RES_BOUNDS[spec])
        med = sorted(by["whole"])[batches // 2]
        print(f"[{spec}] {kind}, {batches} batches of {N}: rounding alone max rel err "
              f"{w['same']:.2e} (cosine {w['same_cos']:.5f}); least cosine {w['tensor'][0]:.4f} "
              f"per tensor ({w['tensor'][1]}), {w['row'][0]:.4f} per row ({w['row'][1]}), "
              f"{w['model']:.4f} whole model (median {med:.4f}); loss rel err {w['loss']:.1e}; "
              f"bounds {bt} / {br} / {bm}")
        assert w["loss"] <= 2e-2, f"{spec} {kind}: the loss is {w['loss']:.1e} off"
        assert w["tensor"][0] >= bt, f"{spec} {kind}: a correct tensor has cosine {w['tensor']}"
        assert w["row"][0] >= br, f"{spec} {kind}: a correct row has cosine {w['row']}"
        assert w["model"] >= bm, f"{spec} {kind}: a correct model has cosine {w['model']:.4f}"
        if spec == "resnet-fm":  # rounding alone: within 16 unit roundoffs of the largest
            assert w["same"] <= 16 * (2.0 ** -11 if kind == "fp16" else 2.0 ** -8), w["same"]
        # the H100's two bf16 failures (cuDNN 9.19): as low as correct gradients go
        h100 = {"c4k3s2p1nb-bn-r-m3s2p1-res4x2-bot2s2p-gap": ("layer 22 bias", 0.89215),
                "resnet-fm": ("layer 23 rows", 0.8621)}.get(spec)
        if kind == "bf16" and h100:
            v = by[h100[0]]
            print(f"   the H100's {h100[0]} {h100[1]}: {share_at_or_below(v, h100[1]):.1%} of "
                  f"correct batches as low or lower (least {min(v):.4f})")
            assert min(v) <= h100[1], f"{spec}: rounding does not explain the H100's {h100}"

# faults against the residual bounds: in each conv layer of 4 or more filters, the largest
# filter of the wrong sign (row cosine about -1), the filters one place on (out of order)
for spec, tile, classes, _ in RES_MODELS:
    layers = build(spec, *tile, classes)
    g = torch.Generator().manual_seed(0)
    P = init_params(layers, g)
    x = torch.randint(0, 256, (N, *tile), generator=g).float() / 255
    lab = torch.randint(0, classes, (N,), generator=g)
    ref, _, _ = net_grads(layers, P, x, lab, lambda t: t, 1.0, None)
    for k, (kind, dt) in enumerate((("fp16", torch.float16), ("bf16", torch.bfloat16))):
        bt, br, bm = (b[k] for b in RES_BOUNDS[spec])
        own, _, _ = amp_grads(layers, P, x, lab, dt)
        sign = order = 0
        convs = [i for i, l in enumerate(layers) if l["kind"] == "conv" and l["out"] >= 4]
        for i in convs:
            r, o = ref[i][0], own[i][0]
            bad = o.clone()
            big = r.reshape(r.shape[0], -1).norm(dim=1).argmax()
            bad[big] = -bad[big]
            sign += row_cos(r, bad) < br
            bad = o.roll(1, 0)
            order += cos(r, bad) < bt or row_cos(r, bad) < br
        print(f"[{spec}] {kind}: of {len(convs)} conv layers, a filter of the wrong sign fails "
              f"in {sign}, filters out of order in {order}")
        if br > -0.9:
            assert sign == len(convs), f"{spec} {kind}: a filter of the wrong sign passes"
        if max(bt, br) >= 0.5:
            assert order == len(convs), f"{spec} {kind}: filters out of order pass"
print("ok")
