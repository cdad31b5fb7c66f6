"""sparkml.optim.newton on local sums: squared-hinge SVMs (one and several at once) and Platt scaling, checked
against scipy, scikit-learn's LinearSVC and scikit-learn's own Platt fit."""

import numpy as np
import pytest
import torch
from scipy.optimize import minimize
from sklearn.calibration import _sigmoid_calibration
from sklearn.svm import LinearSVC as SkLinearSVC
from support.newton_cases import linear_problem, local_evaluate

from sparkml.gpu import DenseBlock, OneVsRestProblems, PlattProblems, SquaredHingeLoss
from sparkml.optim import newton_state
from sparkml.optim.newton import newton


def _svm_objective(x, y, w, reg):
    def objective(t):
        m = x @ t[:-1] + t[-1]
        return float(w @ np.maximum(0, 1 - (2 * y - 1) * m) ** 2 / w.sum() + reg / 2 * t[:-1] @ t[:-1])

    return objective


def test_newton_reaches_the_minimizer_in_a_few_rounds():
    x, y = linear_problem()
    w = np.random.default_rng(1).uniform(0.5, 2.0, len(y))
    reg = 0.05
    evaluate, _ = local_evaluate(lambda idx: OneVsRestProblems(SquaredHingeLoss(), [1.0]), x, y, w)
    theta, (summary,) = newton(
        evaluate,
        np.zeros((1, 5)),
        reg=reg,
        weight_sum=w.sum(),
        fit_intercept=True,
        max_iter=50,
        tol=1e-12,
        names=["test"],
    )
    ref = minimize(_svm_objective(x, y, w, reg), np.zeros(5), method="BFGS", options={"gtol": 1e-10}).x
    np.testing.assert_allclose(theta[0], ref, atol=1e-6)
    assert summary.totalIterations <= 10
    assert np.all(np.diff(summary.objectiveHistory) <= 1e-15)  # monotone


def test_regparam_is_one_over_n_c():
    """lambda = 1 / (n C): the same coefficients as scikit-learn's LinearSVC(loss='squared_hinge', C) with an
    unpenalized intercept (intercept_scaling large makes liblinear's penalty on it negligible)."""
    x, y = linear_problem(seed=3)
    c = 0.7
    evaluate, _ = local_evaluate(lambda idx: OneVsRestProblems(SquaredHingeLoss(), [1.0]), x, y, np.ones(len(y)))
    theta, _ = newton(
        evaluate,
        np.zeros((1, 5)),
        reg=1 / (len(y) * c),
        weight_sum=len(y),
        fit_intercept=True,
        max_iter=50,
        tol=1e-14,
        names=["test"],
    )
    sk = SkLinearSVC(C=c, loss="squared_hinge", dual=False, tol=1e-12, intercept_scaling=1e3, max_iter=10000).fit(x, y)
    np.testing.assert_allclose(theta[0, :4], sk.coef_[0], rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(theta[0, 4], sk.intercept_[0], rtol=1e-4, atol=1e-5)


def _one_vs_rest_newton(x, y, w, classes, reg, solver="cholesky"):
    """(theta, summaries, the passes asked for) of squared-hinge one-vs-rest problems solved together."""
    evaluate, calls = local_evaluate(
        lambda idx: OneVsRestProblems(SquaredHingeLoss(), [classes[j] for j in idx]), x, y, w
    )
    theta, summaries = newton(
        evaluate,
        np.zeros((len(classes), x.shape[1] + 1)),
        reg=reg,
        weight_sum=w.sum(),
        fit_intercept=True,
        max_iter=50,
        tol=1e-12,
        names=[f"class {c}" for c in classes],
        solver=solver,
    )
    return theta, summaries, calls


def test_one_vs_rest_problems_solved_together_match_each_solved_alone():
    x, y = linear_problem(seed=5, n=400, classes=4)
    w, reg = np.ones(len(y)), 0.02
    classes = [0.0, 1.0, 2.0, 3.0]
    theta, summaries, calls = _one_vs_rest_newton(x, y, w, classes, reg)
    for k, c in enumerate(classes):
        ref = minimize(
            _svm_objective(x, (y == c).astype(float), w, reg), np.zeros(5), method="BFGS", options={"gtol": 1e-10}
        ).x
        np.testing.assert_allclose(theta[k], ref, atol=1e-6)
    # one pass per round covers every problem still running: fewer passes than solving them one by one
    assert calls[0] == ((0, 1, 2, 3), "loss_gradient_hessian")
    assert len(calls) < sum(s.totalIterations + 1 for s in summaries)
    assert all(len(idx) > 1 for idx, _ in calls[:3])


def test_truncated_newton_cg_reaches_the_same_minimizers(monkeypatch):
    """solver='cg': Hessian-vector passes and a Jacobi-preconditioned CG instead of forming H (no direct steps
    here: ``test_newton_cg_steps_directly_where_few_rows_are_active``)."""
    monkeypatch.setattr(newton_state, "_DIRECT_ROWS_PER_COEF", 0)
    x, y = linear_problem(seed=9, n=500, d=40, classes=3)
    x = x * np.linspace(0.1, 3.0, 40)  # columns of very different scales, as Nystroem features have
    w, reg = np.ones(len(y)), 1e-3
    classes = [0.0, 1.0, 2.0]
    results = {}
    for solver in ("cholesky", "cg"):
        *results[solver], calls = _one_vs_rest_newton(x, y, w, classes, reg, solver)
        kinds = {kind for _, kind in calls}
        assert ("loss_gradient_hessian" in kinds) == (solver == "cholesky") and ("hessp" in kinds) == (solver == "cg")
    np.testing.assert_allclose(results["cg"][0], results["cholesky"][0], atol=1e-6)
    assert all(s.converged for s in results["cg"][1])


def test_hessian_diagonal_and_products_match_the_hessian():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(80, 5)), rng.integers(0, 3, 80).astype(float)
    block, yt, w = DenseBlock(torch.from_numpy(x)), torch.from_numpy(y), torch.from_numpy(rng.uniform(0.5, 2, 80))
    ovr = OneVsRestProblems(SquaredHingeLoss(), [0.0, 2.0])
    coef, v = torch.from_numpy(rng.normal(size=(2, 6))), torch.from_numpy(rng.normal(size=(2, 6)))
    h = ovr.hessian_block(coef, block, yt, w).numpy()
    f, g, diag, active = ovr.loss_gradient_diagonal(coef, block, yt, w)
    np.testing.assert_allclose(diag.numpy(), np.diagonal(h, axis1=1, axis2=2), rtol=1e-12)
    # the active rows: s m < 1, s = +1 for the problem's class, -1 for the others
    margins = np.hstack([x, np.ones((80, 1))]) @ coef.numpy().T
    signs = np.where(y[:, None] == np.array([0.0, 2.0]), 1.0, -1.0)
    np.testing.assert_array_equal(active.numpy(), np.sum(signs * margins < 1, axis=0))
    assert 0 < active.min() and active.max() < 80
    curvature = ovr.loss_gradient_curvature(coef, block, yt, w)
    np.testing.assert_allclose(curvature[2].numpy(), h[:, -1, -1], rtol=1e-12)
    np.testing.assert_array_equal(curvature[3].numpy(), active.numpy())
    np.testing.assert_allclose(
        ovr.hessp(coef, block, yt, w, v).numpy(), np.einsum("kpq,kq->kp", h, v.numpy()), rtol=1e-12
    )


def test_newton_cg_steps_directly_where_few_rows_are_active(monkeypatch):
    """Newton-CG forms H_j (one pass, over the problem's active rows) where at most _DIRECT_ROWS_PER_COEF rows per
    coefficient are active, and runs CG for the others: from zero every row is active (CG), near the optimum of
    separable-ish data few are (direct). The minimizers are Cholesky's; the direct steps replace most of the
    Hessian-vector passes pure CG takes on the same problems."""
    x, y = linear_problem(seed=9, n=600, d=40, classes=3)
    x = x * np.linspace(0.1, 3.0, 40)
    w, reg, classes = np.ones(len(y)), 1e-4, [0.0, 1.0, 2.0]

    def solve(solver, rows_per_coef):
        monkeypatch.setattr(newton_state, "_DIRECT_ROWS_PER_COEF", rows_per_coef)
        theta, _, calls = _one_vs_rest_newton(x, y, w, classes, reg, solver)
        return theta, calls

    exact, _ = solve("cholesky", 8)
    hybrid, calls = solve("cg", 8)
    pure, pure_calls = solve("cg", 0)
    np.testing.assert_allclose(hybrid, exact, atol=1e-6)
    np.testing.assert_allclose(pure, exact, atol=1e-6)
    kinds = [kind for _, kind in calls]
    assert kinds[1] == "hessp"  # the first round: all 600 rows active, more than 8 x 41
    direct = [idx for idx, kind in calls if kind == "hessian_block"]
    assert direct and "hessian_block" not in [kind for _, kind in pure_calls]
    hessp = kinds.count("hessp")
    # measured: 9 Hessian-vector passes and 5 Hessian passes against 70 Hessian-vector passes
    assert hessp + len(direct) < [kind for _, kind in pure_calls].count("hessp") / 3, (hessp, len(pure_calls))
    monkeypatch.setattr(newton_state, "_DIRECT_MAX_COEF", 40)  # 41 coefficients: beyond it, CG only
    assert "hessian_block" not in [kind for _, kind in solve("cg", 8)[1]]


@pytest.mark.parametrize("intercept", [5.0, 0.0])
def test_hessp_operator_reads_the_active_rows_only(intercept, monkeypatch):
    """One operator per coef, many products, each equal to the formed Hessians times v. With a large
    intercept only the rows of the other class are active (s m < 1, a fifth here): they are copied out
    once; with none, every row is active and the block itself is used."""
    rng = np.random.default_rng(6)
    x, y = rng.normal(size=(400, 5)), (rng.random(400) < 0.8).astype(float)
    block, yt, w = DenseBlock(torch.from_numpy(x)), torch.from_numpy(y), torch.from_numpy(rng.uniform(0.5, 2, 400))
    ovr = OneVsRestProblems(SquaredHingeLoss(), [1.0])
    coef = torch.from_numpy(np.hstack([0.1 * rng.normal(size=(1, 5)), [[intercept]]]))
    taken = []
    monkeypatch.setattr(
        DenseBlock, "take", lambda self, index, take=DenseBlock.take: taken.append(len(index)) or take(self, index)
    )
    times = ovr.hessp_operator(coef, block, yt, w)
    assert taken == ([int(np.sum(y == 0))] if intercept else [])
    h = ovr.hessian_block(coef, block, yt, w).numpy()
    for _ in range(2):
        v = torch.from_numpy(rng.normal(size=(1, 6)))
        np.testing.assert_allclose(times(v).numpy(), np.einsum("kpq,kq->kp", h, v.numpy()), rtol=1e-12)


def test_one_vs_rest_problems_are_the_binary_loss_on_indicators():
    rng = np.random.default_rng(2)
    x, y = rng.normal(size=(50, 3)), rng.integers(0, 3, 50).astype(float)
    coef = torch.from_numpy(rng.normal(size=(2, 4)))
    block, w = DenseBlock(torch.from_numpy(x)), torch.from_numpy(rng.uniform(0.5, 2, 50))
    ovr = OneVsRestProblems(SquaredHingeLoss(), [2.0, 0.0])
    f, g = ovr.loss_gradient(coef, block, torch.from_numpy(y), w)
    h = ovr.hessian_block(coef, block, torch.from_numpy(y), w)
    for j, c in enumerate([2.0, 0.0]):
        yk = torch.from_numpy((y == c).astype(float))
        f1, g1 = SquaredHingeLoss().loss_gradient(coef[j], block, yk, w)
        assert float(f[j]) == pytest.approx(float(f1), rel=1e-14)
        np.testing.assert_allclose(g[j].numpy(), g1.numpy(), rtol=1e-13)
        np.testing.assert_allclose(
            h[j].numpy(), SquaredHingeLoss().hessian_block(coef[j], block, yk, w).numpy(), rtol=1e-13
        )


@pytest.mark.parametrize("weighted", [False, True])
def test_platt_scaling_matches_sklearns_sigmoid_calibration(weighted):
    x, y = linear_problem(seed=7, n=500, classes=3)
    rng = np.random.default_rng(8)
    w = rng.uniform(0.5, 2.0, len(y)) if weighted else np.ones(len(y))
    svm = rng.normal(size=(3, 5))
    classes = [0.0, 1.0, 2.0]
    pos = np.array([w[y == c].sum() for c in classes])
    targets = np.stack([(pos + 1) / (pos + 2), 1 / (w.sum() - pos + 2)], axis=1)
    evaluate, _ = local_evaluate(lambda idx: PlattProblems(svm[idx], [classes[j] for j in idx], targets[idx]), x, y, w)
    ab, summaries = newton(
        evaluate,
        np.zeros((3, 2)),
        reg=0.0,
        weight_sum=w.sum(),
        fit_intercept=True,
        max_iter=100,
        tol=1e-14,
        names=["a", "b", "c"],
    )
    for k, c in enumerate(classes):
        decision = x @ svm[k, :4] + svm[k, 4]
        a_ref, b_ref = _sigmoid_calibration(decision, (y == c).astype(float), w if weighted else None)
        # sklearn: P = 1 / (1 + exp(A f + B)); here P = sigmoid(a f + b)
        np.testing.assert_allclose(ab[k], [-a_ref, -b_ref], rtol=1e-4, atol=1e-5)
        assert summaries[k].converged


def test_landmark_gram_preconditioner_needs_fewer_cg_passes_for_the_same_minimizer(monkeypatch):
    """Nystroem features of two moons: Newton-CG preconditioned by the landmarks' Gram spectrum
    (``NystroemMap.gram_spectrum``) reaches the Cholesky minimizer with fewer Hessian-vector passes than Jacobi
    (every step by CG: no direct steps)."""
    from sklearn.datasets import make_moons

    monkeypatch.setattr(newton_state, "_DIRECT_ROWS_PER_COEF", 0)
    from sparkml.gpu.nystroem import NystroemMap

    x, y = make_moons(n_samples=1500, noise=0.25, random_state=1)
    landmarks = x[np.random.default_rng(0).choice(len(x), 200, replace=False)]
    nystroem = NystroemMap("rbf", torch.from_numpy(landmarks), gamma=1.0)
    phi = nystroem.transform(torch.from_numpy(x)).numpy()
    w, reg = np.ones(len(y)), 1.0 / (len(y) * 10.0)
    results = {}
    for name, solver, preconditioner in [
        ("cholesky", "cholesky", None),
        ("jacobi", "cg", None),
        ("gram", "cg", (nystroem.gram_spectrum()[0].numpy(), nystroem.gram_spectrum()[1].numpy() / 200)),
    ]:
        evaluate, calls = local_evaluate(
            lambda idx: OneVsRestProblems(SquaredHingeLoss(), [1.0]), phi, y.astype(float), w
        )
        theta, (summary,) = newton(
            evaluate,
            np.zeros((1, 201)),
            reg=reg,
            weight_sum=w.sum(),
            fit_intercept=True,
            max_iter=50,
            tol=1e-10,
            names=[name],
            solver=solver,
            preconditioner=preconditioner,
        )
        results[name] = theta, sum(kind == "hessp" for _, kind in calls), summary

    def margins(theta):
        return phi @ theta[0, :200] + theta[0, 200]

    for name in ("jacobi", "gram"):
        # the same objective and decision values (they differ along K_LL's flat directions: by 1e-5
        # here, by 3.2e-5 on a 16-core machine's numpy)
        assert results[name][2].objectiveHistory[-1] == pytest.approx(
            results["cholesky"][2].objectiveHistory[-1], rel=1e-9
        )
        np.testing.assert_allclose(margins(results[name][0]), margins(results["cholesky"][0]), atol=1e-4)
        assert results[name][2].converged
    # measured 222 against 386 passes (2-D moons, a fast-decaying spectrum), and 224 against 293 on a
    # 16-core machine's numpy (Jacobi's count is sensitive to rounding); 2.7x fewer at 50k rows in 20-D
    assert results["gram"][1] < 0.85 * results["jacobi"][1], (results["gram"][1], results["jacobi"][1])


def test_diagonal_preconditioner_of_the_eigenbasis_map():
    """In K_LL's eigenbasis (``NystroemMap(rcond=...)``) the landmarks' Gram matrix is diag(lambda):
    preconditioner (None, lambda / m) reaches the Cholesky minimizer of those features in fewer passes than
    Jacobi (measured 199 against 226: in this basis the Hessian is nearly diagonal already), and without
    the Hessians' diagonals, which cost n m^2 on factored blocks (``sparkml.gpu.factored``)."""
    from sklearn.datasets import make_moons

    from sparkml.gpu.nystroem import NystroemMap

    x, y = make_moons(n_samples=1500, noise=0.25, random_state=1)
    landmarks = x[np.random.default_rng(0).choice(len(x), 200, replace=False)]
    nystroem = NystroemMap("rbf", torch.from_numpy(landmarks), gamma=1.0, rcond=1e-6)
    phi, r = nystroem.transform(torch.from_numpy(x)).numpy(), nystroem.n_components
    v, lam = nystroem.gram_spectrum()
    w, reg = np.ones(len(y)), 1.0 / (len(y) * 10.0)
    results = {}
    for name, solver, preconditioner in [
        ("cholesky", "cholesky", None),
        ("jacobi", "cg", None),
        ("diagonal", "cg", (v, lam.numpy() / 200)),
    ]:
        evaluate, calls = local_evaluate(
            lambda idx: OneVsRestProblems(SquaredHingeLoss(), [1.0]), phi, y.astype(float), w
        )
        theta, (summary,) = newton(
            evaluate,
            np.zeros((1, r + 1)),
            reg=reg,
            weight_sum=w.sum(),
            fit_intercept=True,
            max_iter=50,
            tol=1e-10,
            names=[name],
            solver=solver,
            preconditioner=preconditioner,
        )
        results[name] = phi @ theta[0, :r] + theta[0, r], sum(kind == "hessp" for _, kind in calls), summary
        kinds = {kind for _, kind in calls}
        assert ("loss_gradient_diagonal" in kinds) == (name == "jacobi"), (name, kinds)
    assert v is None and r < 200
    for name in ("jacobi", "diagonal"):
        assert results[name][2].objectiveHistory[-1] == pytest.approx(
            results["cholesky"][2].objectiveHistory[-1], rel=1e-9
        )
        # decision values to 1e-4: an objective within 1e-9 leaves that much along the weakly curved directions
        np.testing.assert_allclose(results[name][0], results["cholesky"][0], atol=1e-4)
    assert results["diagonal"][1] < results["jacobi"][1], (results["diagonal"][1], results["jacobi"][1])


def test_preconditioner_shape_is_checked():
    evaluate, _ = local_evaluate(
        lambda idx: OneVsRestProblems(SquaredHingeLoss(), [1.0]), *linear_problem()[:2], np.ones(300)
    )
    with pytest.raises(ValueError, match="q <= 4 penalized coordinates"):
        newton(
            evaluate,
            np.zeros((1, 5)),
            reg=0.1,
            weight_sum=300.0,
            fit_intercept=True,
            max_iter=5,
            tol=1e-6,
            names=["t"],
            solver="cg",
            preconditioner=(np.eye(5), np.ones(5)),
        )


class _Killed(Exception):
    pass


@pytest.mark.parametrize("solver", ["cholesky", "cg"])
@pytest.mark.parametrize("kill_at", [(0, 2), (1, 3)], ids=["in-the-warm-start", "in-the-main-solve"])
def test_resumed_newton_takes_the_uninterrupted_rounds(tmp_path, solver, kill_at):
    """The squared hinge's warm start then the smoothed hinge, three one-vs-rest problems, a checkpoint every
    round: a run killed at the end of a round (before its checkpoint) and resumed from the previous one takes
    the same rounds to the same theta and reports it. Not bit for bit: the resumed run's first pass sums the
    problems' rows in one product where the killed run summed them in the products of its last round."""
    from sparkml.gpu import SmoothedHingeLoss
    from sparkml.optim.checkpoint import Checkpoint
    from sparkml.optim.iterations import Progress
    from sparkml.optim.newton import newton_warm_started

    x, y = linear_problem(seed=4, n=400, d=12, classes=3)
    w, classes = np.ones(len(y)), [0.0, 1.0, 2.0]

    def evaluate_for(make):
        return local_evaluate(make, x, y, w)[0]

    def problems(loss):
        return lambda idx: OneVsRestProblems(loss, [classes[j] for j in idx])

    options = dict(
        reg=1e-3,
        weight_sum=w.sum(),
        fit_intercept=True,
        max_iter=50,
        tol=1e-10,
        names=["a", "b", "c"],
        solver=solver,
        warm_start=(problems(SquaredHingeLoss()), 2),
    )
    main, theta0 = problems(SmoothedHingeLoss(width=0.1)), np.zeros((3, 13))
    full_theta, full = newton_warm_started(evaluate_for, main, theta0, **options)

    solves = []

    def kill(event):  # a solve's round numbers start at 1 again: count the solves by the first rounds seen
        if event.iteration == 1 and event.name == "a":
            solves.append(1)
        if (len(solves) - 1, event.iteration) == kill_at and event.name == "c":
            raise _Killed

    with pytest.raises(_Killed):
        newton_warm_started(
            evaluate_for,
            main,
            theta0,
            progress=Progress([kill]),
            checkpoint=Checkpoint(str(tmp_path), 1, {"fit": {"id": 1}}, "t"),
            **options,
        )
    checkpoint = Checkpoint(str(tmp_path), 1, {"fit": {"id": 1}}, "t")
    state = checkpoint.load()
    assert (
        state["solve"] == ("warm start", "main")[kill_at[0]] and state["iteration"] == 2 * kill_at[0] + kill_at[1] - 1
    )
    theta, resumed = newton_warm_started(evaluate_for, main, theta0, checkpoint=checkpoint, **options)
    np.testing.assert_allclose(theta, full_theta, rtol=0, atol=1e-12)
    for r, f in zip(resumed, full):
        np.testing.assert_allclose(r.objectiveHistory, f.objectiveHistory, rtol=1e-13)
        assert r.totalIterations == f.totalIterations
        assert r.message == f"{f.message} (resumed from the checkpoint of round {state['iteration']})"
        assert len(r.iterationSeconds) == r.totalIterations and r.iterationSeconds == sorted(r.iterationSeconds)
    assert all(s.converged for s in full) and min(s.totalIterations for s in full) > 3
