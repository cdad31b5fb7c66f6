"""Generalized linear models: the exponential families, their links, and the sums of one IRLS pass.

A GLM relates the mean mu_i = E[y_i] to the linear predictor eta_i = x_i . beta + b + o_i (o_i: the row's
offset) through a link g, g(mu_i) = eta_i, with Var(y_i) = phi V(mu_i) / w_i (phi: the dispersion). The
families (``FAMILIES``; MLlib's, with its numerical guards) give V, the unit deviance and the start mu_0:

    gaussian  V = 1                     d(y, mu) = (y - mu)^2
    binomial  V = mu (1 - mu)           d = 2 [y log(y / mu) + (1 - y) log((1 - y) / (1 - mu))]
    poisson   V = mu                    d = 2 [y log(y / mu) - (y - mu)]
    gamma     V = mu^2                  d = -2 [log(y / mu) - (y - mu) / mu]
    tweedie   V = mu^p                  d = 2 [y (y1^(1-p) - mu^(1-p)) / (1 - p) - (y^(2-p) - mu^(2-p)) / (2 - p)]
                                        (y1 = max(y, 0.1) for 1 <= p < 2; p = 0, 1, 2 are the families above)

and the links (``link_of``): identity, log, inverse, logit, probit, cloglog, sqrt and the power links of
tweedie (mu^q, log for q = 0). Fitted means are kept in the family's range as MLlib keeps them (binomial in
[1e-16, 1 - 1e-16], the tweedie family, poisson and gamma at least 1e-16).

Iteratively reweighted least squares (Fisher scoring): at the current eta, each row gets the working response
and weight

    z_i = eta_i - o_i + (y_i - mu_i) g'(mu_i),     w'_i = w_i / (g'(mu_i)^2 V(mu_i)),

and the next (beta, b) is the weighted least-squares fit of z on [x, 1] with weights w' (MLlib's
``IterativelyReweightedLeastSquares``). The first step regresses g(mu_0(y)) - o on [x, 1] with the weights
w. ``IRLSPass`` returns the sums that fit needs from one pass over a block, as a ``sparkml.gpu`` loss does
(``loss_gradient`` and ``hessian_block``), with the offset stored as the block's last column when there is
one (its coefficient held at 1): the weighted Gram matrix of [x, o, 1], [x, o, 1]^T w' (z + o) and
sum w' (z + o)^2, from which the driver removes the offset's terms, plus the deviance sum_i w_i d(y_i, mu_i).
"""

from __future__ import annotations

import math

import torch

from .losses import LinearLoss

__all__ = ["FAMILIES", "LINKS", "DevianceLoss", "Family", "IRLSPass", "Link", "family_of", "link_of"]

_F64 = torch.float64
EPSILON = 1e-16  # MLlib's GeneralizedLinearRegression.epsilon
TWEEDIE_DELTA = 0.1  # MLlib's Tweedie.delta: the start (and deviance floor) of a zero count
_MAX = torch.finfo(_F64).max


def _ylogy(y, mu):
    """y log(y / mu), 0 where y == 0."""
    return torch.where(y == 0, torch.zeros_like(y), y * torch.log(torch.where(y == 0, torch.ones_like(y), y) / mu))


class Family:
    """An exponential family of variance power ``p`` (tweedie; gaussian 0, poisson 1, gamma 2) or binomial."""

    def __init__(self, name: str, variance_power: float = 0.0):
        self.name, self.p = name, float(variance_power)

    def __repr__(self) -> str:
        return f"Family({self.name!r}, {self.p:g})" if self.name == "tweedie" else f"Family({self.name!r})"

    @property
    def default_link(self) -> str:
        return {"gaussian": "identity", "binomial": "logit", "poisson": "log", "gamma": "inverse"}.get(self.name, "")

    def initialize(self, y, w):
        """mu_0, the IRLS start (MLlib's)."""
        if self.name == "gaussian":
            return y
        if self.name == "binomial":
            return (w * y + 0.5) / (w + 1.0)
        if self.name == "poisson":
            return torch.clamp(y, min=TWEEDIE_DELTA)
        if self.name == "gamma":
            return y
        return torch.where(y == 0, torch.full_like(y, TWEEDIE_DELTA), y)

    def variance(self, mu):
        if self.name == "gaussian":
            return torch.ones_like(mu)
        if self.name == "binomial":
            return mu * (1.0 - mu)
        if self.name == "poisson":
            return mu
        if self.name == "gamma":
            return mu * mu
        return mu**self.p

    def valid_mean(self, mu):
        """Per row: whether mu is a mean the family can have (R's ``validmu``): finite, and in (0, 1) for binomial,
        positive for poisson, gamma and tweedie."""
        ok = torch.isfinite(mu)
        if self.name == "binomial":
            return ok & (mu > 0) & (mu < 1)
        if self.name != "gaussian":
            return ok & (mu > 0)
        return ok

    def project(self, mu):
        """mu kept where the family's variance and deviance are finite (MLlib's ``project``)."""
        if self.name == "gaussian":
            return torch.clamp(mu, -_MAX, _MAX)
        if self.name == "binomial":
            return torch.clamp(mu, EPSILON, 1.0 - EPSILON)
        return torch.clamp(mu, EPSILON, _MAX)

    def deviance(self, y, mu, w):
        """w_i d(y_i, mu_i), per row."""
        if self.name == "gaussian":
            return w * (y - mu) ** 2
        if self.name == "binomial":
            return 2.0 * w * (_ylogy(y, mu) + _ylogy(1.0 - y, 1.0 - mu))
        if self.name == "poisson":
            return 2.0 * w * (_ylogy(y, mu) - (y - mu))
        if self.name == "gamma":
            return -2.0 * w * (torch.log(y / mu) - (y - mu) / mu)
        p = self.p
        y1 = torch.clamp(y, min=TWEEDIE_DELTA) if 1.0 <= p < 2.0 else y

        def yp(a, b, q):
            return torch.log(a / b) if q == 0 else (a**q - b**q) / q

        return 2.0 * w * (y * yp(y1, mu, 1.0 - p) - yp(y, mu, 2.0 - p))


def family_of(name: str, variance_power: float = 0.0) -> Family:
    """MLlib's ``Family.fromParams``: tweedie with variancePower 0, 1 or 2 is gaussian, poisson or gamma."""
    name = name.lower()
    if name == "tweedie":
        return Family(
            {0.0: "gaussian", 1.0: "poisson", 2.0: "gamma"}.get(float(variance_power), "tweedie"), variance_power
        )
    return Family(name)


class Link:
    """A link g(mu) = eta: ``link``, its derivative ``deriv`` and its inverse ``unlink``."""

    def __init__(self, name: str, power: float = 1.0):
        self.name, self.power = name, float(power)  # power: of the "power" link mu^power only

    def __repr__(self) -> str:
        return f"Link(power {self.power:g})" if self.name == "power" else f"Link({self.name!r})"

    def link(self, mu):
        n = self.name
        if n == "identity":
            return mu
        if n == "log":
            return torch.log(mu)
        if n == "inverse":
            return 1.0 / mu
        if n == "logit":
            return torch.log(mu / (1.0 - mu))
        if n == "probit":
            return torch.special.ndtri(mu)
        if n == "cloglog":
            return torch.log(-torch.log1p(-mu))
        if n == "sqrt":
            return torch.sqrt(mu)
        return mu**self.power

    def deriv(self, mu):
        n = self.name
        if n == "identity":
            return torch.ones_like(mu)
        if n == "log":
            return 1.0 / mu
        if n == "inverse":
            return -1.0 / (mu * mu)
        if n == "logit":
            return 1.0 / (mu * (1.0 - mu))
        if n == "probit":
            q = torch.special.ndtri(mu)
            return math.sqrt(2.0 * math.pi) * torch.exp(0.5 * q * q)
        if n == "cloglog":
            return 1.0 / ((mu - 1.0) * torch.log1p(-mu))
        if n == "sqrt":
            return 0.5 / torch.sqrt(mu)
        return self.power * mu ** (self.power - 1.0)

    def valid_predictor(self, eta):
        """Per row: whether eta is in the link's domain: finite, non-zero for inverse and sqrt. (R's ``valideta``
        also wants eta > 0 under sqrt; MLlib takes mu = eta^2 for either sign, and so does this, so that a fit
        MLlib converges with some eta < 0 is MLlib's model.)"""
        ok = torch.isfinite(eta)
        if self.name in ("inverse", "sqrt"):
            return ok & (eta != 0)
        return ok

    def unlink(self, eta):
        n = self.name
        if n == "identity":
            return eta
        if n == "log":
            return torch.exp(eta)
        if n == "inverse":
            return 1.0 / eta
        if n == "logit":
            return torch.sigmoid(eta)
        if n == "probit":
            return torch.special.ndtr(eta)
        if n == "cloglog":
            return 1.0 - torch.exp(-torch.exp(eta))
        if n == "sqrt":
            return eta * eta
        return eta ** (1.0 / self.power)


LINKS = ("identity", "log", "inverse", "logit", "probit", "cloglog", "sqrt")
FAMILIES = ("gaussian", "binomial", "poisson", "gamma", "tweedie")
_POWER_NAMES = {0.0: "log", 1.0: "identity", -1.0: "inverse", 0.5: "sqrt"}


def link_of(family: str, link: str | None, link_power: float | None, variance_power: float = 0.0) -> Link:
    """MLlib's ``FamilyAndLink``: tweedie's link from ``linkPower`` (default 1 - variancePower), the others' from
    ``link`` (default: the family's canonical link); None: unset."""
    if family.lower() == "tweedie":
        q = float(1.0 - variance_power if link_power is None else link_power)
        return Link(_POWER_NAMES[q]) if q in _POWER_NAMES else Link("power", q)
    return Link((link or family_of(family).default_link).lower())


class IRLSPass(LinearLoss):
    """The sums of one IRLS pass over a block at coef = [beta, (1 for the offset column), b] (module docstring).

    ``loss_gradient``: ((sum_i w'_i zo_i^2, sum_i w_i d(y_i, mu_i), n_invalid), sum_i w'_i zo_i [x_i, 1]) with
    zo_i = z_i + o_i, the working response before the offset is taken off, and n_invalid the number of rows of
    positive weight whose eta is outside the link's domain or whose mean g^-1(eta) outside the family's (the
    driver halves such a step, as R's ``glm.fit``); ``hessian_block``:
    sum_i w'_i [x_i, 1] [x_i, 1]^T. ``initial``: the first step's sums (zo = g(mu_0(y)), w' = w, no deviance).
    The intercept column is always there: the driver reads the weighted feature means from it.
    """

    def __init__(self, family: Family, link: Link, initial: bool = False):
        super().__init__(fit_intercept=True)
        self.family, self.link_fn, self.initial = family, link, bool(initial)

    def __repr__(self) -> str:
        return f"IRLSPass({self.family!r}, {self.link_fn!r}, initial={self.initial})"

    def working(self, coef, X, y, w):
        """(zo, w', w d, invalid) per row, float64 (invalid: 1.0 where the row's eta or mean is out of range)."""
        if self.initial:
            zeros = torch.zeros_like(y)
            return self.link_fn.link(self.family.initialize(y, w)), w, zeros, zeros
        eta = self._margins(coef, X)
        raw = self.link_fn.unlink(eta)
        invalid = ~(self.link_fn.valid_predictor(eta) & self.family.valid_mean(raw)) & (w > 0)
        mu = self.family.project(raw)
        slope = self.link_fn.deriv(mu)
        zo, weights = eta + (y - mu) * slope, w / (slope * slope * self.family.variance(mu))
        return zo, weights, self.family.deviance(y, mu, w), invalid.to(_F64)

    def loss_gradient(self, coef, X, y, w=None):
        coef, y, w = self._check(coef, X, y, w)
        zo, weights, deviance, invalid = self.working(coef, X, y, w)
        sums = torch.stack([(weights * zo * zo).sum(), deviance.sum(), invalid.sum()])
        return sums, self._grad_from_rows(X, weights * zo)

    def hessian_block(self, coef, X, y, w=None):
        coef, y, w = self._check(coef, X, y, w)
        return self._hessian_from_weights(X, self.working(coef, X, y, w)[1])


class DevianceLoss(LinearLoss):
    """Half the unit deviance of a GLM as a loss of the linear predictor, for the quasi-Newton solvers:

        l(eta_i, y_i) = d(y_i, mu_i) / 2,   mu_i = g^-1(eta_i) (kept in the family's range),
        dl/deta_i = -(y_i - mu_i) / (V(mu_i) g'(mu_i)),

    eta_i = x_i . beta + b + o_i. So sum_i w_i l_i is the negative log-likelihood at dispersion 1 up to a constant,
    the quantity glum and statsmodels minimize. ``offset``: the block's last column holds o_i, whose coefficient
    is held at 1: the coefficients are [beta, b] over the other columns (``coef_shape`` of a block of d + 1
    columns is d + fit_intercept), the offset's column joined to beta for the product and its gradient dropped.
    """

    _no_hessian_reason = "DevianceLoss serves the quasi-Newton solvers (IRLSPass carries the GLM's curvature)"

    def __init__(self, family: Family, link: Link, fit_intercept: bool = True, offset: bool = False):
        super().__init__(fit_intercept)
        self.family, self.link_fn, self.offset = family, link, bool(offset)

    def __repr__(self) -> str:
        return (
            f"DevianceLoss({self.family!r}, {self.link_fn!r}, fit_intercept={self.fit_intercept}, offset={self.offset})"
        )

    def coef_shape(self, n_features: int) -> tuple[int, ...]:
        return (int(n_features) - int(self.offset) + int(self.fit_intercept),)

    def _split(self, coef):
        beta, b = super()._split(coef)
        if self.offset:
            beta = torch.cat([beta, torch.ones(1, dtype=beta.dtype, device=beta.device)])
        return beta, b

    def _join(self, g_beta, g_b):
        return super()._join(g_beta[:-1] if self.offset else g_beta, g_b)

    def _pointwise(self, m, y):
        mu = self.family.project(self.link_fn.unlink(m))
        loss = 0.5 * self.family.deviance(y, mu, torch.ones_like(y))
        return loss, -(y - mu) / (self.family.variance(mu) * self.link_fn.deriv(mu))
