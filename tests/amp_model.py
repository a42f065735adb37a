#!/usr/bin/python3
"""amp_model - what --amp's gradients may differ by, from a model of its arithmetic.

test_gpu_layers compares the gpu backend's --amp gradients with the cpu
backend's fp32 ones. This script models the plugin's amp arithmetic
(cuda/layers.c), for fp16 and for bf16, on the CPU with PyTorch and
measures, on the built-in cnn (c32k3-r-m2-c64k3-r-m2-d128-r-d10) with the
test's batch of 6 random 28x28 tiles, how far an amp gradient lies from
the fp32 one when nothing is wrong:

  * conv: inputs and weights rounded to 16 bits, products summed in fp32,
    the output rounded to 16 bits (cuDNN with 16-bit tensors), then the
    fp32 bias; backward: x and dy rounded, dw and dx rounded;
  * dense: inputs and weights rounded, the output and dw in fp32
    (cublasGemmEx, fp32 C); dy rounded;
  * ReLU, max pooling, the loss and bias gradients in fp32; fp16 with a
    loss scale, bf16 without.

Findings, asserted below:
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
elementwise bound stays for fp32. Skips (77) without PyTorch.
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
print("ok")
