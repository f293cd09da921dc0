#!/usr/bin/python3
"""The independent reference for sluice's pad, crop and level ops: torchvision's
functional transforms on tensors (Debian's python3-torchvision; Debian 12's
0.14 has no transforms.v2, whose pad and crop keep these semantics), and
numpy's pad where torch's reflect padding refuses (padding >= the side).

    torchvision_reference.py IN OUT SPEC_JSON

IN holds an image's bytes, row-major HWC (NHWC for the level ops); SPEC_JSON says
{"shape": [H, W, C], "dtype": "uint8"|"float32", "op": ..., attrs...}:
    op "pad": padding, fill, padding_mode (torchvision.transforms.functional.pad)
    op "random_crop_padded": padding, pad_if_needed, size, fill, padding_mode:
        the image RandomCrop draws its window from (its pads, in its order)
    op "affine": angle, scale, shear [x, y]: F.affine, bilinear, no shift, zeros outside
    op "perspective": endpoints (the corners' new places): F.perspective, bilinear, zeros outside
    op "invert", "posterize" (bits), "solarize" (threshold), "autocontrast",
        "equalize", "grayscale" (num_output_channels), "brightness", "contrast",
        "saturation", "hue", "sharpness" (factor): the functional op on uint8
    op "augment_candidates": policy "rand_augment" (num_ops, magnitude,
        num_magnitude_bins), "trivial_augment_wide" (num_magnitude_bins) or
        "auto_augment" (auto_policy), interpolation, fill: every image the
        policy can make of each input, as torchvision's _apply_op makes it
        (OUT holds [K, N, H, W, C]; OUT.json the K names)
Writes the result's bytes (HWC) to OUT.
"""

import itertools
import json
import sys

import numpy as np
import torch
import torchvision.transforms.functional as F
import torchvision.transforms.functional_tensor as F_t


def blas_free_bmm(base, theta):
    """base [1, N, 3] times theta [1, 3, 2] as the reference BLAS computes it
    (each product rounded to float32, summed over k in order), without
    calling a BLAS: torch's bmm goes through the machine's BLAS, and
    OpenBLAS sums in another order, which moves nearest-neighbour ties, so
    the reference would depend on which BLAS the machine has."""
    out = base[..., 0:1] * theta[:, 0:1, :]
    out = out + base[..., 1:2] * theta[:, 1:2, :]
    return out + base[..., 2:3] * theta[:, 2:3, :]


def gen_affine_grid(theta, w, h, ow, oh):
    """torchvision's _gen_affine_grid with blas_free_bmm."""
    d = 0.5
    base_grid = torch.empty(1, oh, ow, 3, dtype=theta.dtype)
    base_grid[..., 0].copy_(torch.linspace(-ow * 0.5 + d, ow * 0.5 + d - 1, steps=ow))
    base_grid[..., 1].copy_(torch.linspace(-oh * 0.5 + d, oh * 0.5 + d - 1, steps=oh).unsqueeze_(-1))
    base_grid[..., 2].fill_(1)
    rescaled_theta = theta.transpose(1, 2) / torch.tensor([0.5 * w, 0.5 * h], dtype=theta.dtype)
    return blas_free_bmm(base_grid.view(1, oh * ow, 3), rescaled_theta).view(1, oh, ow, 2)


def perspective_grid(coeffs, ow, oh, dtype, device):
    """torchvision's _perspective_grid with blas_free_bmm."""
    theta1 = torch.tensor([[[coeffs[0], coeffs[1], coeffs[2]], [coeffs[3], coeffs[4], coeffs[5]]]], dtype=dtype)
    theta2 = torch.tensor([[[coeffs[6], coeffs[7], 1.0], [coeffs[6], coeffs[7], 1.0]]], dtype=dtype)
    d = 0.5
    base_grid = torch.empty(1, oh, ow, 3, dtype=dtype)
    base_grid[..., 0].copy_(torch.linspace(d, ow * 1.0 + d - 1.0, steps=ow))
    base_grid[..., 1].copy_(torch.linspace(d, oh * 1.0 + d - 1.0, steps=oh).unsqueeze_(-1))
    base_grid[..., 2].fill_(1)
    rescaled_theta1 = theta1.transpose(1, 2) / torch.tensor([0.5 * ow, 0.5 * oh], dtype=dtype)
    output_grid1 = blas_free_bmm(base_grid.view(1, oh * ow, 3), rescaled_theta1)
    output_grid2 = blas_free_bmm(base_grid.view(1, oh * ow, 3), theta2.transpose(1, 2))
    return (output_grid1 / output_grid2 - 1.0).view(1, oh, ow, 2)


F_t._gen_affine_grid = gen_affine_grid
F_t._perspective_grid = perspective_grid


def pad(chw, padding, fill, mode):
    """F.pad, or numpy.pad (the same values) where torch refuses a reflection."""
    left, top, right, bottom = padding
    h, w = chw.shape[1:]
    if mode in ("reflect", "symmetric") and (max(left, right) >= w or max(top, bottom) >= h):
        return torch.from_numpy(np.pad(chw.numpy(), ((0, 0), (top, bottom), (left, right)), mode=mode))
    if isinstance(fill, list) and len(fill) == 1:
        fill = fill[0]
    if mode == "constant" and isinstance(fill, list):  # per channel: pad each plane
        return torch.stack([F.pad(chw[c:c + 1], [left, top, right, bottom], fill=fill[c])[0]
                            for c in range(chw.shape[0])])
    return F.pad(chw, [left, top, right, bottom], fill=fill, padding_mode=mode)


LEVEL_OPS = {
    "invert": lambda x, s: F.invert(x),
    "posterize": lambda x, s: F.posterize(x, s["bits"]),
    "solarize": lambda x, s: F.solarize(x, s["threshold"]),
    "autocontrast": lambda x, s: F.autocontrast(x),
    "equalize": lambda x, s: F.equalize(x),
    "grayscale": lambda x, s: F.rgb_to_grayscale(x, s.get("num_output_channels", 1)).contiguous(),
    "brightness": lambda x, s: F.adjust_brightness(x, s["factor"]),
    "contrast": lambda x, s: torch.stack([F.adjust_contrast(i, s["factor"]) for i in x]),
    "saturation": lambda x, s: F.adjust_saturation(x, s["factor"]),
    "hue": lambda x, s: F.adjust_hue(x, s["factor"]),
    "sharpness": lambda x, s: F.adjust_sharpness(x, s["factor"]),
}


def augment_draws(spec, h, w):
    """Each sequence of (op, magnitude, signed) the policy can apply."""
    from torchvision.transforms import autoaugment as aa
    policy = spec["policy"]
    if policy == "auto_augment":
        t = aa.AutoAugment(aa.AutoAugmentPolicy(spec.get("auto_policy", "imagenet")))
        space = t._augmentation_space(10, (h, w))
        draws = []
        for sub in t.policies:
            for applied in itertools.product([False, True], repeat=2):
                draws.append([(name, float(space[name][0][b]) if b is not None else 0.0, space[name][1])
                              for (name, _, b), a in zip(sub, applied) if a])
        return draws
    bins = spec["num_magnitude_bins"]
    if policy == "rand_augment":
        space = aa.RandAugment()._augmentation_space(bins, (h, w))
        one = [(name, float(m[spec["magnitude"]]) if m.ndim else 0.0, signed) for name, (m, signed) in space.items()]
        return [list(d) for d in itertools.product(one, repeat=spec["num_ops"])]
    space = aa.TrivialAugmentWide()._augmentation_space(bins)
    return [[(name, float(v), signed)] for name, (m, signed) in space.items() for v in (m if m.ndim else [0.0])]


def augment_candidates(nchw, spec, out):
    """Every image each draw makes, with each sign of its signed magnitudes."""
    from torchvision.transforms import autoaugment as aa, InterpolationMode
    interpolation = InterpolationMode.BILINEAR if spec.get("interpolation") == "bilinear" else InterpolationMode.NEAREST
    fill = spec.get("fill")
    names, images = [], []
    for draw in augment_draws(spec, nchw.shape[2], nchw.shape[3]):
        for signs in itertools.product([1.0, -1.0], repeat=len(draw)):
            steps = [(name, m * (s if signed else 1.0)) for (name, m, signed), s in zip(draw, signs)]
            name = "+".join(f"{n}({m:g})" for n, m in steps) or "Identity(0)"
            if name in names:
                continue
            img = nchw
            for n, m in steps:
                img = aa._apply_op(img, n, m, interpolation=interpolation, fill=fill)
            names.append(name)
            images.append(img.numpy().transpose(0, 2, 3, 1))
    np.stack(images).tofile(out)
    with open(out + ".json", "w") as f:
        json.dump(names, f)


def sides(p):
    if len(p) == 0:
        return [0, 0, 0, 0]
    if len(p) == 1:
        return [p[0]] * 4
    if len(p) == 2:
        return [p[0], p[1], p[0], p[1]]
    return list(p)


def main(argv):
    src, out, spec = argv[1], argv[2], json.loads(argv[3])
    dtype = np.dtype(spec["dtype"])
    op = spec["op"]
    if op in LEVEL_OPS or op == "augment_candidates":  # shape [N, H, W, C]: N images at once
        nhwc = np.fromfile(src, dtype=dtype).reshape(spec["shape"])
        nchw = torch.from_numpy(np.ascontiguousarray(nhwc.transpose(0, 3, 1, 2)))
        if op == "augment_candidates":
            augment_candidates(nchw, spec, out)
        else:
            LEVEL_OPS[op](nchw, spec).numpy().transpose(0, 2, 3, 1).tofile(out)
        return
    h, w, c = spec["shape"]
    hwc = np.fromfile(src, dtype=dtype).reshape(h, w, c)
    chw = torch.from_numpy(np.ascontiguousarray(hwc.transpose(2, 0, 1)))
    if op == "affine":  # F.affine, bilinear, on the tensor; fill None: zeros outside, blended once
        from torchvision.transforms import InterpolationMode
        out_chw = F.affine(chw, angle=spec["angle"], translate=[0, 0], scale=spec["scale"], shear=spec["shear"],
                           interpolation=InterpolationMode.BILINEAR, fill=None)
        out_chw.numpy().transpose(1, 2, 0).astype(dtype).tofile(out)
        return
    if op == "perspective":
        from torchvision.transforms import InterpolationMode
        start = [[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]]
        out_chw = F.perspective(chw, start, spec["endpoints"], interpolation=InterpolationMode.BILINEAR, fill=None)
        out_chw.numpy().transpose(1, 2, 0).astype(dtype).tofile(out)
        return
    fill, mode = spec.get("fill", [0]), spec.get("padding_mode", "constant")
    chw = pad(chw, sides(spec["padding"]), fill, mode)
    if op == "random_crop_padded" and spec.get("pad_if_needed"):
        th, tw = spec["size"]
        if chw.shape[2] < tw:  # RandomCrop.forward's order: the width, then the height
            chw = pad(chw, [tw - chw.shape[2], 0, tw - chw.shape[2], 0], fill, mode)
        if chw.shape[1] < th:
            chw = pad(chw, [0, th - chw.shape[1], 0, th - chw.shape[1]], fill, mode)
    elif op not in ("pad", "random_crop_padded"):
        sys.exit(f"unknown op {op}")
    chw.numpy().transpose(1, 2, 0).astype(dtype).tofile(out)


if __name__ == "__main__":
    main(sys.argv)
