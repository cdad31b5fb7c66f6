"""Scoring linear models on a batch of rows: margins and the link functions of each model.

For a batch X (n, d), coefficients W (K, d) and intercepts b (K,):

    margins     M = X W^T + b                          (n, K)
    logistic    p = 1 / (1 + exp(-m))                  (binary, K = 1)
    softmax     p_k = exp(M_k - max M) / sum_j exp(M_j - max M)
    Platt       q_k = sigmoid(a_k M_k + b_k); binary [1 - q, q], else q_k / sum_j q_j

Computed in float64 so scores match MLlib's double-precision predictions.
"""

import torch


def linear_margins(x, coef, intercept):
    """M = X W^T + b as float64, (n, K); ``x`` (n, d), ``coef`` (K, d), ``intercept`` (K,)."""
    x = x.to(torch.float64)
    return torch.addmm(intercept.to(x).unsqueeze(0), x, coef.to(x).T)


def binary_logistic_probability(margin):
    """P(y = 1 | m) = sigmoid(m), for a 1-D tensor of margins."""
    return torch.sigmoid(margin)


def softmax_probability(margins):
    """Row-wise softmax of (n, K) margins (max-shifted, stable)."""
    return torch.softmax(margins, dim=1)


def platt_probability(margins, ab):
    """Platt-scaled probabilities of (n, K) decision values with ``ab`` (K, 2) = (a_k, b_k):
    (n, 2) [1 - q, q] for one problem (binary), else the K sigmoids normalized per row."""
    q = torch.sigmoid(margins * ab[:, 0].to(margins) + ab[:, 1].to(margins))
    if q.shape[1] == 1:
        return torch.cat([1 - q, q], dim=1)
    return q / q.sum(dim=1, keepdim=True)


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
