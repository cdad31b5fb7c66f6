"""Classification problems for the KernelSVC benchmarks and accuracy tests, reproducible offline.

* Breiman's generated problems (L. Breiman, "Bias, variance and arcing classifiers", 1996; the UCI and
  DELVE "twonorm", "ringnorm" and "waveform" sets are draws from these definitions):

  - ``twonorm``: 20 features, x ~ N(+a, I) for class 1 and N(-a, I) for class 0, a = 2 / sqrt(20) per coordinate;
  - ``ringnorm``: 20 features, class 0 ~ N(0, 4 I), class 1 ~ N(a, I) with a = 1 / sqrt(20);
  - ``waveform``: 3 classes, 21 features, each row a random convex mix u h_i + (1 - u) h_j of two of three
    triangular waves (peaks at 11, 15 and 7 of 1..21, height 6) plus N(0, 1) noise on every feature.

* ``segment``: the UCI image segmentation set (2310 rows, 19 features, 7 classes), as the ``river`` package
  ships it (``pip install river``; None without it).

* ``synthetic``: the KernelSVC benchmarks' own nonlinear binary problem, any size and width.

* ``sized_up``: scikit-learn's breast cancer and digits sets drawn to any size with noise.

Each generator returns (x, y) as float64 arrays, labels 0..K-1; ``split`` makes a standardized 70/30 split of
one, ``public`` and ``bundled`` yield the public problems and scikit-learn's bundled ones split so.
"""

import numpy as np


def twonorm(n, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(np.float64)
    a = 2 / np.sqrt(20)
    return rng.standard_normal((n, 20)) + np.where(y[:, None] == 1, a, -a), y


def ringnorm(n, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n).astype(np.float64)
    wide, narrow = 2 * rng.standard_normal((n, 20)), rng.standard_normal((n, 20)) + 1 / np.sqrt(20)
    return np.where(y[:, None] == 0, wide, narrow), y


def waveform(n, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(1, 22)
    waves = np.stack([np.maximum(6 - np.abs(t - peak), 0) for peak in (11, 15, 7)]).astype(np.float64)
    pairs = np.array([(0, 1), (0, 2), (1, 2)])  # class k mixes these two waves
    y = rng.integers(0, 3, n)
    u = rng.random(n)[:, None]
    x = u * waves[pairs[y, 0]] + (1 - u) * waves[pairs[y, 1]] + rng.standard_normal((n, 21))
    return x, y.astype(np.float64)


def segment():
    """(x, y) of the UCI image segmentation set from ``river``'s package data, or None without river."""
    import importlib.util
    import os

    import pandas as pd

    spec = importlib.util.find_spec("river")  # its data file only: river itself is not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    frame = pd.read_csv(
        os.path.join(spec.submodule_search_locations[0], "datasets", "segment.csv.zip"), compression="zip"
    )
    y = pd.factorize(frame["category"], sort=True)[0].astype(np.float64)
    return frame.drop(columns="category").to_numpy(np.float64), y


def synthetic(n, d, seed):
    """(x, y): x ~ N(0, I_d); y = 1[x1^2 + x2^2 - 2 x3 x4 + 2 sin(2 x5) + 0.3 N(0, 1) > 1.5]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    score = x[:, 0] ** 2 + x[:, 1] ** 2 - 2 * x[:, 2] * x[:, 3] + 2 * np.sin(2 * x[:, 4])
    y = (score + 0.3 * rng.standard_normal(n) > 1.5).astype(np.float64)
    return x, y


def split(name, x, y):
    """(name, x_train, x_test, y_train, y_test): a 70/30 stratified split, standardized on the training rows."""
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    xtr, xte, ytr, yte = train_test_split(x, y.astype(np.float64), test_size=0.3, random_state=0, stratify=y)
    scaler = StandardScaler().fit(xtr)
    return name, scaler.transform(xtr), scaler.transform(xte), ytr, yte


def bundled():
    from sklearn import datasets

    for name in ("breast_cancer", "digits", "wine", "iris"):
        yield split(name, *getattr(datasets, f"load_{name}")(return_X_y=True))


def sized_up(rows, seed, noise=0.25):
    """(name, x_train, x_test, y_train, y_test) of scikit-learn's breast cancer (binary, 30 features) and digits (10
    classes, 64 features) sets at ``rows`` rows: each one's 70/30 split (``split``) standardized, then each side drawn
    to its share of ``rows`` (training rows from training rows, test rows from test rows) with replacement, plus
    N(0, ``noise``^2) on every standardized feature, so no drawn row repeats another."""
    rng = np.random.default_rng(seed)
    for name, xtr, xte, ytr, yte in bundled():
        if name not in ("breast_cancer", "digits"):
            continue
        sides = []
        for x, y, n in ((xtr, ytr, int(0.7 * rows)), (xte, yte, rows - int(0.7 * rows))):
            pick = rng.integers(0, len(y), n)
            sides.append((x[pick] + noise * rng.standard_normal((n, x.shape[1])), y[pick]))
        (xtr, ytr), (xte, yte) = sides
        yield f"{name} sized up", xtr, xte, ytr, yte


def public(rows, seed):
    """(name, x_train, x_test, y_train, y_test) of each public problem above (``split``), ``rows`` rows each."""
    problems = [(f.__name__, f(rows, seed)) for f in (twonorm, ringnorm, waveform)]
    problems.append(("segment", segment()))
    for name, data in problems:
        if data is None:
            print(f"  {name}: skipped (pip install river to add it)", flush=True)
            continue
        yield split(name, *data)
