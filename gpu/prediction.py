"""Scoring linear models on a batch of rows: margins and the link functions of each model.

For a batch X (n, d), coefficients W (K, d) and intercepts b (K,):

    margins     M = X W^T + b                          (n, K)
    logistic    p = 1 / (1 + exp(-m))                  (binary, K = 1)
    softmax     p_k = exp(M_k - max M) / sum_j exp(M_j - max M)

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
