"""One-vs-one kernel SVMs at the torch level: libsvm's pairs as OneVsOneProblems, their Platt sigmoids,
SVC's vote and the pairwise coupling of probabilities, checked against one-vs-rest on each pair's rows and
against scikit-learn's SVC."""

import numpy as np
import pytest
import torch
from sklearn.calibration import _sigmoid_calibration
from support.newton_cases import linear_problem, local_evaluate

from sparkml.gpu import DenseBlock, OneVsRestProblems, PlattProblems, SquaredHingeLoss
from sparkml.optim.newton import newton


@pytest.mark.parametrize("layout", ["dense", "factored", "stacked", "kernel"])
def test_one_vs_one_reads_each_class_run_for_its_pairs_only(layout, monkeypatch):
    """Rows in label order (as ``TrainingData.derive`` writes them): every pass reads each class's run of rows
    with that class's pairs only (3 of the 6 pairs of 4 classes), and returns the sums of the same rows in another
    order, where the pass reads them whole (every pair on every row)."""
    from sparkml.gpu import OneVsOneProblems, SmoothedHingeLoss
    from sparkml.gpu.factored import FactoredBlock
    from sparkml.gpu.kernel_block import KernelBlock
    from sparkml.gpu.stacked import RowStack

    rng = np.random.default_rng(11)
    x, y = linear_problem(seed=12, n=240, d=5, classes=4)
    w = rng.uniform(0.5, 2.0, len(y))
    landmarks, right = rng.normal(size=(7, 5)), rng.normal(size=(7, 7))

    def block(rows):
        xs = torch.from_numpy(x[rows])
        if layout == "dense":
            return DenseBlock(xs)
        if layout == "kernel":
            return KernelBlock(xs, torch.from_numpy(landmarks), "rbf", gamma=0.2)
        if layout == "factored":
            return FactoredBlock(DenseBlock(xs), torch.from_numpy(right[:5]))
        half = len(rows) // 2  # two partitions, each in label order: two runs a class
        return RowStack([DenseBlock(xs[:half]), DenseBlock(xs[half:])])

    order = np.concatenate([np.argsort(y[: len(y) // 2], kind="stable"), len(y) // 2 + np.argsort(y[len(y) // 2 :])])
    if layout != "stacked":
        order = np.argsort(y, kind="stable")
    shuffled = rng.permutation(len(y))
    pairs = [(a, b) for a in range(4) for b in range(a + 1, 4)]
    ovo = OneVsOneProblems(SmoothedHingeLoss(width=0.5), pairs)
    p = block(order).n_features + 1
    theta, v = torch.from_numpy(rng.normal(size=(6, p))), torch.from_numpy(rng.normal(size=(6, p)))
    widths = []
    margin_pass = DenseBlock.margin_pass
    monkeypatch.setattr(
        DenseBlock, "margin_pass", lambda self, u, fn: widths.append(u.shape[-1]) or margin_pass(self, u, fn)
    )

    def sums(rows):
        args = (block(rows), torch.from_numpy(y[rows]), torch.from_numpy(w[rows]))
        widths.clear()
        out = [*ovo.loss_gradient_curvature(theta, *args), *ovo.loss_gradient_hessian(theta, *args)]
        passes = list(widths)
        return out + [ovo.hessp_operator(theta, *args)(v)], passes

    grouped, run_widths = sums(order)
    whole, whole_widths = sums(shuffled)
    assert set(run_widths) == {3} and set(whole_widths) == {6}, (run_widths, whole_widths)
    for a, b in zip(grouped, whole):
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-10, atol=1e-10)


def test_hessian_products_over_few_rows_of_a_factored_block_read_its_formed_features():
    """A Newton round's Hessian-vector products over a Nystroem block (A R) with few rows against its problems'
    columns read A R formed once (no product of the factors), and equal the factored products; with many rows
    the factors are read (``FactoredBlock.for_products``)."""
    from sparkml.gpu import OneVsOneProblems, SmoothedHingeLoss
    from sparkml.gpu.factored import FactoredBlock

    rng = np.random.default_rng(4)
    x, y = linear_problem(seed=5, n=120, d=6, classes=4)
    order = np.argsort(y, kind="stable")
    x, y = x[order], y[order]
    left, right = torch.from_numpy(x), torch.from_numpy(rng.normal(size=(6, 9)))
    ovo = OneVsOneProblems(SmoothedHingeLoss(width=0.5), [(a, b) for a in range(4) for b in range(a + 1, 4)])
    theta, v = torch.from_numpy(rng.normal(size=(6, 10)) * 0.3), torch.from_numpy(rng.normal(size=(6, 10)))
    calls = []
    margin_pass = FactoredBlock.margin_pass

    def counted(self, u, fn):
        calls.append(self.n_rows)
        return margin_pass(self, u, fn)

    def products(rows):
        block = FactoredBlock(DenseBlock(left[:rows]), right)
        labels, weights = torch.from_numpy(y[:rows]), torch.ones(rows, dtype=torch.float64)
        calls.clear()
        out = ovo.hessp_operator(theta, block, labels, weights)(v)
        # the reference: the same products with the factors read (a threshold no block meets)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("sparkml.gpu.factored._FORM_ROWS_PER_COLUMN", 0)
            reference = ovo.hessp_operator(theta, block, labels, weights)(v)
        return out, list(calls), reference

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(FactoredBlock, "margin_pass", counted)
        few, few_calls, few_reference = products(120)  # 4 runs x 3 pairs: 12 columns, up to 480 rows formed
        np.testing.assert_allclose(few.numpy(), few_reference.numpy(), rtol=1e-10, atol=1e-12)
        assert len(few_calls) == 4, few_calls  # the reference's 4 class runs only: the products read A R formed
        patch.setattr("sparkml.gpu.factored._FORM_ROWS_PER_COLUMN", 1)  # 12 rows a product at most: factors read
        _, many_calls, _ = products(120)
        assert len(many_calls) == 8, many_calls


def test_one_vs_one_pairs_are_one_vs_rest_on_the_two_classes_rows():
    """OneVsOneProblems' pair (a, b) is OneVsRestProblems' class a over the rows of a and b only: the same sums
    at any theta, and Newton on all pairs at once lands each pair where Newton on its rows alone does (the
    same 1/W: every pair weighs its rows against the whole data's weight, libsvm's C per pair)."""
    from sparkml.gpu import OneVsOneProblems, SmoothedHingeLoss

    x, y = linear_problem(seed=3, n=400, d=5, classes=3)
    w = np.random.default_rng(4).uniform(0.5, 2.0, len(y))
    pairs = [(0.0, 1.0), (0.0, 2.0), (1.0, 2.0)]
    theta = np.random.default_rng(5).normal(size=(3, 6))
    block, yt, wt = DenseBlock(torch.from_numpy(x)), torch.from_numpy(y), torch.from_numpy(w)
    ovo = OneVsOneProblems(SmoothedHingeLoss(width=0.1), pairs)
    f, g, diag, active = ovo.loss_gradient_diagonal(torch.from_numpy(theta), block, yt, wt)
    for j, (a, b) in enumerate(pairs):
        rows = np.isin(y, (a, b))
        sub = DenseBlock(torch.from_numpy(x[rows]))
        ovr = OneVsRestProblems(SmoothedHingeLoss(width=0.1), [a])
        fj, gj, dj, aj = ovr.loss_gradient_diagonal(
            torch.from_numpy(theta[j : j + 1]), sub, torch.from_numpy(y[rows]), torch.from_numpy(w[rows])
        )
        np.testing.assert_allclose(f[j].numpy(), fj[0].numpy(), rtol=1e-12)
        np.testing.assert_allclose(g[j].numpy(), gj[0].numpy(), rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(diag[j].numpy(), dj[0].numpy(), rtol=1e-12, atol=1e-12)
        assert 0 < float(active[j]) == float(aj[0]) < rows.sum()  # the band's rows, of the pair's rows only
        np.testing.assert_allclose(
            ovo.hessian_block(torch.from_numpy(theta), block, yt, wt)[j].numpy(),
            ovr.hessian_block(
                torch.from_numpy(theta[j : j + 1]), sub, torch.from_numpy(y[rows]), torch.from_numpy(w[rows])
            )[0].numpy(),
            rtol=1e-12,
            atol=1e-12,
        )
    reg, options = 0.01, {"fit_intercept": True, "max_iter": 50, "tol": 1e-12, "solver": "cg"}
    evaluate, _ = local_evaluate(lambda idx: OneVsOneProblems(SquaredHingeLoss(), [pairs[j] for j in idx]), x, y, w)
    together, _ = newton(evaluate, np.zeros((3, 6)), reg=reg, weight_sum=w.sum(), names=["a", "b", "c"], **options)
    for j, (a, b) in enumerate(pairs):
        rows = np.isin(y, (a, b))
        evaluate, _ = local_evaluate(lambda idx: OneVsRestProblems(SquaredHingeLoss(), [a]), x[rows], y[rows], w[rows])
        alone, _ = newton(evaluate, np.zeros((1, 6)), reg=reg, weight_sum=w.sum(), names=["alone"], **options)
        np.testing.assert_allclose(together[j], alone[0], atol=1e-7)


def test_pairwise_platt_scaling_is_sklearns_sigmoid_calibration_on_the_pairs_rows():
    """PlattProblems with one-vs-one pairs: pair (a, b)'s sigmoid is fitted on the rows of a and b only,
    P(a | a or b), as libsvm before coupling: scikit-learn's sigmoid calibration of those rows."""
    x, y = linear_problem(seed=9, n=600, classes=3)
    rng = np.random.default_rng(10)
    w = rng.uniform(0.5, 2.0, len(y))
    pairs = [(0.0, 1.0), (0.0, 2.0), (1.0, 2.0)]
    svm = rng.normal(size=(3, 5))
    pos = np.array([w[y == a].sum() for a, _ in pairs])
    neg = np.array([w[y == b].sum() for _, b in pairs])
    targets = np.stack([(pos + 1) / (pos + 2), 1 / (neg + 2)], axis=1)
    firsts = [a for a, _ in pairs]

    def problems(idx):
        return PlattProblems(svm[idx], [firsts[j] for j in idx], targets[idx], True, [pairs[j] for j in idx])

    evaluate, _ = local_evaluate(problems, x, y, w)
    ab, summaries = newton(
        evaluate, np.zeros((3, 2)), reg=0.0, weight_sum=w.sum(), fit_intercept=True, max_iter=100, tol=1e-14,
        names=["a", "b", "c"],
    )  # fmt: skip
    for j, (a, b) in enumerate(pairs):
        rows = np.isin(y, (a, b))
        decision = x[rows] @ svm[j, :4] + svm[j, 4]
        a_ref, b_ref = _sigmoid_calibration(decision, (y[rows] == a).astype(float), w[rows])
        np.testing.assert_allclose(ab[j], [-a_ref, -b_ref], rtol=1e-4, atol=1e-5)
        assert summaries[j].converged
    with pytest.raises(ValueError, match="first class of each pair"):
        PlattProblems(svm, [1.0, 0.0, 1.0], targets, True, pairs)


def test_one_vs_one_scores_are_svcs_ovr_shaped_decision_function():
    """scikit-learn's SVC: decision_function_shape="ovr" turns its one-vs-one decision values into these
    scores, and its predictions are their argmax (no ties here)."""
    from sklearn import datasets
    from sklearn.svm import SVC

    from sparkml.gpu.prediction import one_vs_one_scores

    x, y = datasets.load_wine(return_X_y=True)
    x = (x - x.mean(0)) / x.std(0)
    svc = SVC(C=0.3, decision_function_shape="ovo").fit(x, y)
    ovo = svc.decision_function(x)
    pairs = [(a, b) for a in range(3) for b in range(a + 1, 3)]  # libsvm's order
    ours = one_vs_one_scores(torch.from_numpy(ovo), pairs, 3).numpy()
    np.testing.assert_allclose(ours, svc.set_params(decision_function_shape="ovr").decision_function(x), atol=1e-12)
    np.testing.assert_array_equal(ours.argmax(1), svc.predict(x))


def test_pairwise_coupling_is_libsvms():
    """Pairwise coupling (Wu, Lin and Weng's second method) of the Platt probabilities of scikit-learn's SVC
    gives its predict_proba, up to libsvm's stopping tolerance (it iterates to 0.005 / K; measured 1.6e-3
    at most), and recovers p exactly from consistent pairwise probabilities p_a / (p_a + p_b)."""
    import warnings

    from sklearn import datasets
    from sklearn.svm import SVC

    from sparkml.gpu.prediction import pairwise_coupling

    for loader in (datasets.load_iris, datasets.load_wine, datasets.load_digits):
        x, y = loader(return_X_y=True)
        x = (x - x.mean(0)) / (x.std(0) + 1e-12)
        with warnings.catch_warnings():  # SVC(probability=True) is deprecated in scikit-learn 1.9
            warnings.simplefilter("ignore", FutureWarning)
            svc = SVC(probability=True, decision_function_shape="ovo", random_state=0).fit(x, y)
            a, b = svc.probA_, svc.probB_
        k = len(svc.classes_)
        pairs = [(i, j) for i in range(k) for j in range(i + 1, k)]  # libsvm's order
        r = 1 / (1 + np.exp(svc.decision_function(x) * a + b))  # libsvm: P(first class of the pair)
        ours = pairwise_coupling(torch.from_numpy(r), pairs, k).numpy()
        np.testing.assert_allclose(ours, svc.predict_proba(x), atol=2e-3)
        np.testing.assert_allclose(ours.sum(1), 1.0, rtol=1e-12)
    p = np.random.default_rng(0).dirichlet(np.ones(5), size=50)
    pairs = [(i, j) for i in range(5) for j in range(i + 1, 5)]
    consistent = np.stack([p[:, i] / (p[:, i] + p[:, j]) for i, j in pairs], axis=1)
    np.testing.assert_allclose(pairwise_coupling(torch.from_numpy(consistent), pairs, 5).numpy(), p, atol=1e-9)
