"""Scoring linear models on a batch of rows: margins and the link functions of each model.

For a batch X (n, d), coefficients W (K, d) and intercepts b (K,):

    margins     M = X W^T + b                          (n, K)
    logistic    p = 1 / (1 + exp(-m))                  (binary, K = 1)
    softmax     p_k = exp(M_k - max M) / sum_j exp(M_j - max M)
    Platt       q_k = sigmoid(a_k M_k + b_k); binary [1 - q, q], else q_k / sum_j q_j (one-vs-rest),
                or the pairs' q coupled into class probabilities (one-vs-one, ``pairwise_coupling``)

Computed in float64 so scores match MLlib's double-precision predictions.
"""

import torch


def linear_margins(x, coef, intercept):
    """M = X W^T + b as float64, (n, K); ``x`` (n, d), ``coef`` (K, d), ``intercept`` (K,).

    A row whose margins are not all finite (an infinite or NaN feature, or a product past float64's range) is
    summed again from its products x_j w_kj, each rounded on its own, as MLlib's dot product sums them: a
    fused multiply-add in the matrix product (the CPU's BLAS kernel decides) would keep an overflowing product
    exact and turn MLlib's inf + (-inf) = NaN into inf."""
    x = x.to(torch.float64)
    w = coef.to(x)
    b = intercept.to(x)
    m = torch.addmm(b.unsqueeze(0), x, w.T)
    rows = ~torch.isfinite(m).all(dim=1)
    if bool(rows.any()):
        m[rows] = (x[rows].unsqueeze(1) * w.unsqueeze(0)).sum(dim=2) + b
    return m


def binary_logistic_probability(margin):
    """P(y = 1 | m) = sigmoid(m), for a 1-D tensor of margins."""
    return torch.sigmoid(margin)


def softmax_probability(margins):
    """Row-wise softmax of (n, K) margins (max-shifted, stable), as MLlib's (``ml.impl.Utils.softmax``): a row
    with a +inf margin is 1 at its first +inf and elsewhere 0 * m (MLlib's BLAS scaling of the row by 0: 0, or
    NaN where m is infinite or NaN); a row with a NaN margin, or only -inf ones, is NaN."""
    p = torch.softmax(margins, dim=1)
    infinite = torch.isposinf(margins)
    rows = infinite.any(dim=1)
    if rows.any():
        first = torch.argmax(infinite[rows].to(torch.int8), dim=1)
        hot = margins[rows] * 0
        hot[torch.arange(len(first)), first] = 1.0
        p[rows] = hot
    return p


def mllib_argmax(scores, nan_first_wins=True):
    """(n,) float64 index of each row's largest score as MLlib's ``Vector.argmax``: the first of equal ones, NaN
    never larger; MLlib starts from the first score, so a row whose first score is NaN gives 0
    (``nan_first_wins``; False: from -inf, as its ``probability2prediction`` with thresholds)."""
    filled = torch.where(torch.isnan(scores), torch.full_like(scores, -torch.inf), scores)
    index = torch.argmax(filled, dim=1)
    if nan_first_wins:
        index = torch.where(torch.isnan(scores[:, 0]), torch.zeros_like(index), index)
    return index.to(torch.float64)


def platt_probability(margins, ab, pairs=None, num_classes=None):
    """Platt-scaled probabilities of (n, K) decision values with ``ab`` (K, 2) = (a_k, b_k):
    (n, 2) [1 - q, q] for one problem (binary), else the K sigmoids normalized per row; with one-vs-one
    ``pairs`` of ``num_classes`` classes, the pairs' sigmoids coupled (``pairwise_coupling``)."""
    q = torch.sigmoid(margins * ab[:, 0].to(margins) + ab[:, 1].to(margins))
    if q.shape[1] == 1:
        return torch.cat([1 - q, q], dim=1)
    if pairs is not None:
        return pairwise_coupling(q, pairs, num_classes)
    return q / q.sum(dim=1, keepdim=True)


# libsvm's bounds on a pairwise probability before coupling (its ``min_prob``)
_MIN_PAIRWISE_PROBABILITY = 1e-7


def pairwise_coupling(r, pairs, num_classes):
    """(n, K) class probabilities from (n, P) pairwise ones, r_j = P(y = a | y in {a, b}, x) for pair
    j = (a, b): the second method of Wu, Lin and Weng (2004), which libsvm (``SVC(probability=True)``) uses.

    With r_st = P(y = s | y in {s, t}) (r_ts = 1 - r_st) it finds the p on the simplex that best satisfies
    r_ts p_s = r_st p_t for every pair,

        min_p  sum_s sum_{t != s} (r_ts p_s - r_st p_t)^2 = 2 p^T Q p   s.t.  sum_s p_s = 1,
        Q_ss = sum_{t != s} r_ts^2,   Q_st = -r_ts r_st,

    whose optimum is non-negative (their Theorem 2). Its KKT conditions are one linear system per row,
    [Q 1; 1^T 0] [p; mu] = [0; 1], solved here directly in float64 (libsvm iterates to a tolerance of
    0.005 / K). The pairwise r are first clipped to [1e-7, 1 - 1e-7] as in libsvm.
    """
    r = r.to(torch.float64).clamp(_MIN_PAIRWISE_PROBABILITY, 1 - _MIN_PAIRWISE_PROBABILITY)
    n, k = r.shape[0], int(num_classes)
    pairwise = torch.zeros((n, k, k), dtype=torch.float64, device=r.device)  # [s, t] = r_st
    for j, (a, b) in enumerate(pairs):
        pairwise[:, int(a), int(b)] = r[:, j]
        pairwise[:, int(b), int(a)] = 1 - r[:, j]
    off_diagonal = -pairwise * pairwise.transpose(1, 2)  # [s, t] = -r_st r_ts
    q = off_diagonal + torch.diag_embed((pairwise.transpose(1, 2) ** 2).sum(2))  # Q_ss = sum_t r_ts^2
    system = torch.zeros((n, k + 1, k + 1), dtype=torch.float64, device=r.device)
    system[:, :k, :k] = q
    system[:, :k, k] = 1
    system[:, k, :k] = 1
    rhs = torch.zeros((n, k + 1, 1), dtype=torch.float64, device=r.device)
    rhs[:, k] = 1
    p = torch.linalg.solve(system, rhs)[:, :k, 0].clamp(min=0)  # the clamp only removes rounding
    return p / p.sum(dim=1, keepdim=True)


def one_vs_one_scores(margins, pairs, num_classes):
    """(n, K) class scores of one-vs-one decision values: votes plus confidences, as scikit-learn's ``SVC``
    with ``decision_function_shape="ovr"``.

    Pair j = (a, b) with margin m_j votes for a when m_j >= 0, else for b; class c scores its votes plus
    s_c / (3 (|s_c| + 1)), s_c the sum of its pairs' margins signed towards it. The confidence term lies
    in (-1/3, 1/3): the argmax is the class with most votes, ties broken by confidence (libsvm breaks them
    by the lowest class index).
    """
    margins = margins.to(torch.float64)
    n = margins.shape[0]
    votes = torch.zeros((n, num_classes), dtype=torch.float64, device=margins.device)
    confidence = torch.zeros_like(votes)
    for j, (a, b) in enumerate(pairs):
        m, a, b = margins[:, j], int(a), int(b)
        won = (m >= 0).to(torch.float64)
        votes[:, a] += won
        votes[:, b] += 1 - won
        confidence[:, a] += m
        confidence[:, b] -= m
    return votes + confidence / (3 * (confidence.abs() + 1))
