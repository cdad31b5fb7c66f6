"""Lloyd's k-means: centres that summarise a sample of rows, used as Nystroem landmarks.

Given rows x_1..x_n with weights w_i >= 0 (all 1 by default) and k starting centres (k distinct
rows of positive weight drawn with ``seed``), each iteration assigns every row to its nearest
centre, a(i) = argmin_j ||x_i - c_j||^2, and moves each centre to the weighted mean of its rows,
c_j = sum_{a(i) = j} w_i x_i / sum_{a(i) = j} w_i; a centre whose rows weigh nothing stays where it
is. Each iteration lowers (or keeps) the weighted within-cluster sum of squares
sum_i w_i ||x_i - c_a(i)||^2. Integer weights give the centres of the rows repeated that often.

Why for landmarks: the Nystroem approximation error of a kernel matrix is bounded by a term that
grows with that sum of squares (Zhang, Tsang and Kwok, "Improved Nystrom low-rank approximation and
error analysis", ICML 2008), so centres spread over the data's mass approximate K better than the
same number of uniformly drawn rows.

Distances use ||x||^2 - 2 x.c + ||c||^2 in float64 (or float32, ``assign_dtype``), over row chunks of at
most ``_CHUNK_PAIRS`` row-centre pairs, so memory stays bounded whatever n and k.
"""

import torch

_CHUNK_PAIRS = 1 << 22


def kmeans(x, k, *, iters=10, seed=0, init=None, weights=None, assign_dtype=torch.float64):
    """The k centres (a float64 (k, d) tensor, on x's device) after at most ``iters`` Lloyd iterations
    (fewer at a fixed point) from ``init`` (k starting centres) or else k distinct rows of x of
    positive weight drawn with ``seed``; those rows themselves (as float64) when there are at most k.
    ``weights``: (n,) row weights >= 0 (None: all 1). ``assign_dtype``: the precision of the distances
    that assign rows to centres (float32: twice as fast on a CPU; a row equidistant from two centres to
    within float32 rounding may go to either), the centres' means are float64 either way."""
    x = torch.as_tensor(x).to(torch.float64)
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    if weights is None:
        weights = torch.ones(x.shape[0], dtype=torch.float64, device=x.device)  # sums of ones: exact counts
    weights = torch.as_tensor(weights).to(device=x.device, dtype=torch.float64).reshape(-1)
    if weights.numel() != x.shape[0] or not bool(torch.all(weights >= 0)):
        raise ValueError(
            f"weights must be {x.shape[0]} values >= 0 (one per row); got {weights.numel()} values, "
            f"minimum {float(weights.min()) if weights.numel() else None}"
        )
    positive = x[weights > 0]
    if init is None and positive.shape[0] <= k:
        return positive.clone()
    if init is not None:
        centres = torch.as_tensor(init).to(device=x.device, dtype=torch.float64).clone()
        if centres.shape != (k, x.shape[1]):
            raise ValueError(f"init must hold k={k} centres of {x.shape[1]} features; got shape {tuple(centres.shape)}")
    else:
        generator = torch.Generator().manual_seed(int(seed))
        centres = positive[torch.randperm(positive.shape[0], generator=generator)[:k].to(x.device)].clone()
    weighted = x * weights[:, None]
    x_assign = x.to(assign_dtype)
    for _ in range(iters):
        assign = nearest(x_assign, centres.to(assign_dtype))
        counts = torch.zeros(k, dtype=torch.float64, device=x.device).index_add_(0, assign, weights)
        sums = torch.zeros_like(centres).index_add_(0, assign, weighted)
        moved = counts > 0
        updated = sums[moved] / counts[moved, None]
        if torch.equal(updated, centres[moved]):
            break  # a fixed point: no row changes centre again
        centres[moved] = updated
    return centres


def nearest(x, centres):
    """Index of each row's nearest centre (squared Euclidean distance), as an int64 (n,) tensor."""
    c_sq = (centres * centres).sum(1)
    step = max(1, _CHUNK_PAIRS // max(1, centres.shape[0]))
    out = torch.empty(x.shape[0], dtype=torch.int64, device=x.device)
    for start in range(0, x.shape[0], step):
        rows = x[start : start + step]
        # ||x||^2 is the same for every centre of a row: argmin over ||c||^2 - 2 x.c
        out[start : start + step] = torch.addmm(c_sq, rows, centres.T, alpha=-2.0).argmin(1)
    return out
