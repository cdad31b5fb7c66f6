"""KernelSVC's multi-class probabilities against scikit-learn's SVC(probability=True): held-out log loss.

The multi-class problems of ``bench_kernel_svc.py`` (waveform at ``--public-rows`` rows, the UCI image
segmentation set with ``pip install river``, scikit-learn's digits, wine and iris), the same 70/30 stratified
split, standardized on the training rows. For each:

* scikit-learn ``SVC(C, gamma="scale", probability=True)``: libsvm's one-vs-one pairs, a Platt sigmoid per
  pair fitted by an internal 5-fold cross-validation, the pairs coupled into class probabilities (Wu, Lin
  and Weng 2004);
* ``KernelSVC(regParam=1/(n C), probability=True)`` at its defaults with ``multiClass="ovo"`` (the sigmoids
  per pair on the training decision values, coupled as libsvm) and ``multiClass="ovr"`` (a sigmoid per class,
  normalized): fit seconds on a cached DataFrame, held-out log loss and accuracy of ``prediction``.

    .venv/bin/python benchmarks/bench_kernel_svc_probability.py

Prints a table and writes JSON (default ``benchmarks/results/kernel_svc_probability.json``).
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report
from bench_kernel_svc import SVC_CACHE_MB, bundled, frame, make_session, public


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--c", type=float, default=1.0, help="SVC's C; KernelSVC regParam = 1 / (n C)")
    p.add_argument("--public-rows", type=int, default=5000, help="rows of the generated waveform problem")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--partitions", type=int, default=2)
    p.add_argument("--master", default="local[2]")
    p.add_argument("--driver-memory", default="8g")
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results", "kernel_svc_probability.json"))
    return p.parse_args(argv)


def problems(args):
    """The multi-class problems of bench_kernel_svc, split and standardized."""
    for name, xtr, xte, ytr, yte in [*public(args.public_rows, args.seed), *bundled()]:
        if len(np.unique(ytr)) > 2:
            yield name, xtr, xte, ytr, yte


def fit_sklearn(args, xtr, xte, ytr, yte):
    from sklearn.metrics import log_loss
    from sklearn.svm import SVC

    with warnings.catch_warnings():  # SVC(probability=True) is deprecated from scikit-learn 1.9 on
        warnings.simplefilter("ignore", FutureWarning)
        t0 = time.perf_counter()
        svc = SVC(C=args.c, gamma="scale", probability=True, cache_size=SVC_CACHE_MB, random_state=0).fit(xtr, ytr)
        fit_s = time.perf_counter() - t0
        prob = svc.predict_proba(xte)
    return {"fit_s": fit_s, "log_loss": float(log_loss(yte, prob)), "accuracy": float(np.mean(svc.predict(xte) == yte))}


def fit_ours(args, train, test, n, multi_class):
    from sklearn.metrics import log_loss

    from sparkml.classification import KernelSVC

    t0 = time.perf_counter()
    model = KernelSVC(regParam=1.0 / (n * args.c), probability=True, multiClass=multi_class).fit(train)
    fit_s = time.perf_counter() - t0
    rows = model.transform(test).select("label", "probability", "prediction").collect()
    prob = np.array([r.probability.toArray() for r in rows])
    label, pred = np.array([r.label for r in rows]), np.array([r.prediction for r in rows])
    return {"fit_s": fit_s, "log_loss": float(log_loss(label, prob)), "accuracy": float(np.mean(pred == label))}


def table(rows):
    lines = [
        "| data set | rows x d, classes | SVC log loss | ovo log loss | ovr log loss | SVC acc. | ovo acc. | "
        "ovr acc. | SVC fit s | ovo fit s | ovr fit s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        sk, ovo, ovr = r["sklearn"], r["ovo"], r["ovr"]
        lines.append(
            f"| {r['name']} | {r['rows']} x {r['features']}, {r['classes']} | {sk['log_loss']:.3f} | "
            f"{ovo['log_loss']:.3f} | {ovr['log_loss']:.3f} | {sk['accuracy']:.4f} | {ovo['accuracy']:.4f} | "
            f"{ovr['accuracy']:.4f} | {sk['fit_s']:.2f} | {ovo['fit_s']:.2f} | {ovr['fit_s']:.2f} |"
        )
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    spark = make_session(args)
    rows = []
    for name, xtr, xte, ytr, yte in problems(args):
        print(f"{name}: {len(ytr)} training rows", flush=True)
        train = frame(spark, xtr, ytr, args.partitions)
        test = frame(spark, xte, yte, 1)
        if not rows:  # Spark starts its Python workers once per session: not on the first timed fit
            fit_ours(args, train, test, len(ytr), "ovr")
        row = {"name": name, "rows": len(ytr), "features": xtr.shape[1], "classes": len(np.unique(ytr))}
        row["sklearn"] = fit_sklearn(args, xtr, xte, ytr, yte)
        for multi_class in ("ovo", "ovr"):
            row[multi_class] = fit_ours(args, train, test, len(ytr), multi_class)
        rows.append(row)
        train.unpersist()
        test.unpersist()
    notes = (
        "Held-out log loss (lower is better) of the class probabilities. KernelSVC fits its Platt sigmoids on the "
        "training decision values, SVC by a 5-fold cross-validation (5 more fits). Accuracy is of `prediction` "
        "(the vote for ovo, SVC's rule)."
    )
    report.write(args.out, "KernelSVC probabilities against SVC(probability=True)", table(rows), {"rows": rows}, notes)
    spark.stop()


if __name__ == "__main__":
    main()
