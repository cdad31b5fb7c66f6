"""Lloyd's k-means: centres that summarise a sample of rows, used as Nystroem landmarks.

Given rows x_1..x_n and k starting centres (k distinct rows drawn with ``seed``), each iteration
assigns every row to its nearest centre, a(i) = argmin_j ||x_i - c_j||^2, and moves each centre to
the mean of its rows, c_j = mean{x_i : a(i) = j}; a centre with no rows stays where it is. Each
iteration lowers (or keeps) the within-cluster sum of squares sum_i ||x_i - c_a(i)||^2.

Why for landmarks: the Nystroem approximation error of a kernel matrix is bounded by a term that
grows with that sum of squares (Zhang, Tsang and Kwok, "Improved Nystrom low-rank approximation and
error analysis", ICML 2008), so centres spread over the data's mass approximate K better than the
same number of uniformly drawn rows.

Distances use ||x||^2 - 2 x.c + ||c||^2 in float64, over row chunks of at most ``_CHUNK_PAIRS``
row-centre pairs, so memory stays bounded whatever n and k.
"""
import torch

_CHUNK_PAIRS = 1 << 22


def kmeans(x, k, *, iters=10, seed=0, init=None):
    """The k centres (a float64 (k, d) tensor, on x's device) after at most ``iters`` Lloyd iterations
    (fewer at a fixed point) from ``init`` (k starting centres) or else k distinct rows of x drawn
    with ``seed``; x itself (as float64) when it has at most k rows."""
    x = torch.as_tensor(x).to(torch.float64)
    n = x.shape[0]
    if k < 1:
        raise ValueError(f"k must be >= 1; got {k}")
    if init is None and n <= k:
        return x.clone()
    if init is not None:
        centres = torch.as_tensor(init).to(device=x.device, dtype=torch.float64).clone()
        if centres.shape != (k, x.shape[1]):
            raise ValueError(f"init must hold k={k} centres of {x.shape[1]} features; got shape {tuple(centres.shape)}")
    else:
        generator = torch.Generator().manual_seed(int(seed))
        centres = x[torch.randperm(n, generator=generator)[:k].to(x.device)].clone()
    for _ in range(iters):
        assign = nearest(x, centres)
        counts = torch.bincount(assign, minlength=k)
        sums = torch.zeros_like(centres).index_add_(0, assign, x)
        moved = counts > 0
        updated = sums[moved] / counts[moved, None].to(x.dtype)
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
        rows = x[start:start + step]
        # ||x||^2 is the same for every centre of a row: argmin over ||c||^2 - 2 x.c
        out[start:start + step] = torch.addmm(c_sq, rows, centres.T, alpha=-2.0).argmin(1)
    return out
