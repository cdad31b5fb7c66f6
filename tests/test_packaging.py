"""The installed names: the wheel claims one top-level package, ``sparkml`` (gpu/ and jobs/, linked in as
sparkml/gpu and sparkml/jobs, install as ``sparkml.gpu`` and ``sparkml.jobs``), and the zip shipped to executors
and a source checkout import the same way.

The wheel and the sdist are built here (system tier), or taken from ``$SPARKML_TESTS_DIST`` (the ``dist/`` that
``make dist`` built from this checkout, as CI does before it runs the system tier)."""

import os
import subprocess
import sys
import tarfile
import zipfile

import pytest
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


def _built(suffix, tmp_path, argv):
    """The path of the one ``suffix`` file of ``$SPARKML_TESTS_DIST``, or of ``argv`` + [outdir, ROOT] run into
    ``tmp_path``."""
    dist = os.environ.get("SPARKML_TESTS_DIST")
    if dist:
        (found,) = [f for f in os.listdir(dist) if f.endswith(suffix)]
        return os.path.join(dist, found)
    build = subprocess.run([*argv, str(tmp_path), ROOT], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    (found,) = [f for f in os.listdir(tmp_path) if f.endswith(suffix)]
    return str(tmp_path / found)


@pytest.mark.system
def test_the_wheel_claims_only_sparkml(tmp_path):
    wheel = _built(
        ".whl", tmp_path, [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w"]
    )
    names = zipfile.ZipFile(wheel).namelist()
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
    # every module of the source tree, subpackages included (an editable install's finder would import a package
    # the wheel lacks from the checkout, so an import from the installed wheel alone cannot tell)
    source = {
        os.path.relpath(os.path.join(folder, f), ROOT).replace(os.sep, "/")
        for folder, _, files in os.walk(os.path.join(ROOT, "sparkml"), followlinks=True)
        for f in files
        if f.endswith(".py") and "__pycache__" not in folder
    }
    assert sorted(source - set(names)) == []
    wheel_zip = zipfile.ZipFile(wheel)
    info = next(n for n in names if n.endswith(".dist-info/METADATA"))
    requires = [ln for ln in wheel_zip.read(info).decode().splitlines() if ln.startswith("Requires-Dist: ")]
    pyspark = [ln for ln in requires if ln.split()[1].startswith("pyspark")]
    assert pyspark and all("extra ==" in ln for ln in pyspark), pyspark  # never forced onto a platform's Spark
    assert any(ln.startswith("Requires-Dist: torch") and "==" not in ln and "extra" not in ln for ln in requires)
    scripts = wheel_zip.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    for script in (
        "sparkml-train = sparkml.jobs.train:cli",
        "sparkml-retrain = sparkml.jobs.retrain:cli",
        "sparkml-predict = sparkml.jobs.predict:cli",
    ):
        assert script in scripts
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), wheel],
        check=True,
        capture_output=True,
        timeout=300,
    )
    gpu_file, estimator_file = _import_from(str(target), cwd=str(tmp_path))
    assert gpu_file == str(target / "sparkml" / "gpu" / "__init__.py")
    assert estimator_file == str(target / "sparkml" / "base" / "estimator.py")


@pytest.mark.system
def test_the_sdist_holds_the_linked_folders_as_files(tmp_path):
    """The links sparkml/gpu and sparkml/jobs are copied through: the sdist (which `make dist` builds the wheel
    from) holds their files as plain members, and no link."""
    sdist = _built(".tar.gz", tmp_path, [sys.executable, "-m", "build", "--sdist", "--no-isolation", "--outdir"])
    with tarfile.open(sdist) as tar:
        members = {m.name.split("/", 1)[1]: m for m in tar.getmembers() if "/" in m.name}
    assert not [name for name, m in members.items() if m.issym() or m.islnk()]
    for name in ("gpu", "jobs"):
        files = sorted(f for f in os.listdir(os.path.join(ROOT, name)) if f.endswith(".py"))
        assert members[f"sparkml/{name}"].isdir()
        assert all(members[f"sparkml/{name}/{f}"].isfile() for f in files), name


def test_the_executor_zip_imports_sparkml_gpu_from_itself(tmp_path):
    path = session.package_zip(session.SHIPPED_PACKAGES, str(tmp_path))
    names = zipfile.ZipFile(path).namelist()
    assert "sparkml/gpu/kernels.py" in names and "sparkml/base/estimator.py" in names
    assert not any(n.startswith(("gpu/", "jobs/", "sparkml/jobs/")) for n in names)
    assert len(names) == len(set(names))
    gpu_file, estimator_file = _import_from(path, cwd=str(tmp_path))
    assert gpu_file == os.path.join(path, "sparkml", "gpu", "__init__.py")
    assert estimator_file == os.path.join(path, "sparkml", "base", "estimator.py")


def test_a_source_checkout_resolves_the_same_names(tmp_path):
    """sparkml/gpu and sparkml/jobs link to the top-level folders: from a checkout on sys.path, with no finder of
    the project's own, the same two names import the files under gpu/ and jobs/."""
    assert os.readlink(os.path.join(ROOT, "sparkml", "gpu")) == os.path.join("..", "gpu")
    assert os.readlink(os.path.join(ROOT, "sparkml", "jobs")) == os.path.join("..", "jobs")
    code = (
        f"import sys; sys.path.insert(0, {ROOT!r}); import sparkml.gpu.losses, sparkml.jobs.train; "
        "print(sparkml.gpu.losses.__file__); print(sparkml.jobs.train.__file__); "
        "print(sum(type(f).__module__.startswith('sparkml') for f in sys.meta_path))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    losses, train, finders = out.stdout.split()
    assert losses == os.path.join(ROOT, "sparkml", "gpu", "losses.py")
    assert os.path.realpath(losses) == os.path.join(os.path.realpath(ROOT), "gpu", "losses.py")
    assert os.path.realpath(train) == os.path.join(os.path.realpath(ROOT), "jobs", "train.py")
    assert finders == "0"
