"""The example job configs shipped with the package (``conf/`` in a checkout), and finding one by name."""

import os


def examples_dir():
    """The example job configs: ``sparkml/conf`` in an installed package, ``conf/`` in a source checkout."""
    import sparkml

    package = os.path.dirname(os.path.abspath(sparkml.__file__))
    installed = os.path.join(package, "conf")
    return installed if os.path.isdir(installed) else os.path.join(os.path.dirname(package), "conf")


def example_names():
    """The example configs' file names (``logistic_demo.yaml``, ...)."""
    directory = examples_dir()
    return sorted(f for f in os.listdir(directory) if f.endswith(".yaml")) if os.path.isdir(directory) else []


def resolve_path(path):
    """`path` when it exists; else the example config of that name (``logistic_demo``,
    ``logistic_demo.yaml`` or ``conf/logistic_demo.yaml``), so ``sparkml-train --config logistic_demo.yaml``
    works from an installed package; else `path` unchanged (its read then fails, naming it)."""
    if os.path.exists(path):
        return path
    name = os.path.basename(path)
    for candidate in (name, f"{name}.yaml"):
        if candidate in example_names():
            return os.path.join(examples_dir(), candidate)
    return path
