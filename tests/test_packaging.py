"""The installed names: the wheel claims one top-level package, ``sparkml`` (gpu/ and jobs/ install as
``sparkml.gpu`` and ``sparkml.jobs``), and the zip shipped to executors imports the same way."""

import os
import subprocess
import sys
import zipfile

from support.helpers import ROOT

from sparkml.jobs import session


def _import_from(path, cwd):
    """``sparkml.gpu``'s and ``sparkml.base.estimator``'s files when ``path`` is first on sys.path."""
    code = (
        f"import sys; sys.path.insert(0, {path!r}); import sparkml.gpu, sparkml.base.estimator; "
        "print(sparkml.gpu.__file__); print(sparkml.base.estimator.__file__)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_the_wheel_claims_only_sparkml(tmp_path):
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path), ROOT],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = [f for f in os.listdir(tmp_path) if f.endswith(".whl")]
    names = zipfile.ZipFile(tmp_path / wheel).namelist()
    assert {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")} == {"sparkml"}
    for module in (
        "sparkml/gpu/kernels.py",
        "sparkml/jobs/train.py",
        "sparkml/base/estimator.py",
        "sparkml/py.typed",
        "sparkml/conf/logistic_demo.yaml",
        "sparkml/conf/retrain_demo.yaml",
    ):
        assert module in names
    wheel_zip = zipfile.ZipFile(tmp_path / wheel)
    info = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [ln for ln in wheel_zip.read(info).decode().splitlines() if ln.startswith("Requires-Dist: ")]
    pyspark = [ln for ln in requires if ln.split()[1].startswith("pyspark")]
    assert pyspark and all("extra ==" in ln for ln in pyspark), pyspark  # never forced onto a platform's Spark
    assert any(ln.startswith("Requires-Dist: torch") and "==" not in ln and "extra" not in ln for ln in requires)
    scripts = wheel_zip.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    for script in (
        "sparkml-train = sparkml.jobs.train:main",
        "sparkml-retrain = sparkml.jobs.retrain:main",
        "sparkml-predict = sparkml.jobs.predict:main",
    ):
        assert script in scripts
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(tmp_path / wheel)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    gpu_file, estimator_file = _import_from(str(target), cwd=str(tmp_path))
    assert gpu_file == str(target / "sparkml" / "gpu" / "__init__.py")
    assert estimator_file == str(target / "sparkml" / "base" / "estimator.py")


def test_the_executor_zip_imports_sparkml_gpu_from_itself(tmp_path):
    path = session.package_zip(session.SHIPPED_PACKAGES, str(tmp_path))
    names = zipfile.ZipFile(path).namelist()
    assert "sparkml/gpu/kernels.py" in names and "sparkml/base/estimator.py" in names
    assert not any(n.startswith(("gpu/", "jobs/", "sparkml/jobs/")) for n in names)
    assert len(names) == len(set(names))
    gpu_file, estimator_file = _import_from(path, cwd=str(tmp_path))
    assert gpu_file == os.path.join(path, "sparkml", "gpu", "__init__.py")
    assert estimator_file == os.path.join(path, "sparkml", "base", "estimator.py")


def test_a_source_checkout_resolves_the_same_names():
    import sparkml.gpu
    import sparkml.jobs

    assert sparkml.gpu.__file__ == os.path.join(ROOT, "gpu", "__init__.py")
    assert sparkml.jobs.__file__ == os.path.join(ROOT, "jobs", "__init__.py")
