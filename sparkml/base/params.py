"""The pyspark side of the Params declared in ``sparkml.params``: each declaration becomes the class's pyspark
``Param``, getter, setter and default, and the estimator's signature.

MLlib's Params come from pyspark.ml's own mixins (names, descriptions and defaults as MLlib's); this library's
are made here from their declarations. ``declares`` adds a list of declarations to a Params class (an estimator's
and its model's shared Params); ``declared_estimator`` also gives the estimator a setter for each and an
``__init__`` whose signature lists them with their defaults (``help()``, ``inspect.signature``). The type stubs of
the methods made here are written into the classes by ``tools/write_param_stubs.py`` (a test keeps them current).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pyspark.ml.param import Param, Params
from pyspark.ml.param.shared import HasCheckpointInterval

from sparkml.params import training
from sparkml.params.declared import Declared, defaults

if TYPE_CHECKING:
    from typing_extensions import Self

# Params that stock MLlib's classes lack: kept out of the MLlib-format metadata's paramMap.
TORCH_PARAM_NAMES = tuple(d.name for d in (*training.TRAINING, *training.SOLVER_OPTIONS, training.CLASS_WEIGHT))


def own_param_names(instance) -> tuple[str, ...]:
    """The Params of ``instance`` that stock MLlib's class lacks: ``TORCH_PARAM_NAMES`` and the class's own
    extensions (``_own_param_names``: GeneralizedLinearRegression's elasticNetParam)."""
    return TORCH_PARAM_NAMES + tuple(getattr(instance, "_own_param_names", ()))


def accessor_name(prefix: str, name: str) -> str:
    """``getRegParam`` of ``("get", "regParam")``."""
    return prefix + name[0].upper() + name[1:]


def _getter(name):
    def get(self):
        return self.getOrDefault(name)

    get.__doc__ = f"Gets the value of :py:attr:`{name}` or its default."
    return get


def _setter(name):
    def set_(self, value):
        return self._set(**{name: value})

    set_.__doc__ = f"Sets the value of :py:attr:`{name}`."
    return set_


_MADE = frozenset((_getter("x").__code__, _setter("x").__code__))


def made_by_declaration(method) -> bool:
    """Whether ``method`` is a getter or setter ``declares`` made (the type stubs are written for those)."""
    return getattr(method, "__code__", None) in _MADE


def _add_accessor(cls, prefix, make, name):
    method_name = accessor_name(prefix, name)
    if not hasattr(cls, method_name):  # pyspark's own (LogisticRegression's getThreshold reads thresholds) stay
        method = make(name)
        method.__name__ = method.__qualname__ = method_name
        setattr(cls, method_name, method)


def declares(*declarations: Declared, setters: bool = False):
    """A class decorator for a Params class: a pyspark ``Param`` for each of this library's ``declarations`` the
    class lacks (MLlib's come from pyspark's mixins), a getter for each (with ``setters``, a setter too: the
    estimators', and the training Params' on every class, as pyspark's mixins of MLlib's own), and ``__init__``
    setting the declared defaults after its bases' (so an estimator's own default of an MLlib Param replaces
    pyspark's). ``cls._declared``: the declarations."""

    def decorate(cls):
        for d in declarations:
            inherited = getattr(cls, d.name, None)
            if not d.mllib and not (isinstance(inherited, Param) and inherited.doc == d.doc):
                setattr(cls, d.name, Param(Params._dummy(), d.name, d.doc or "", typeConverter=d.converter))
            _add_accessor(cls, "get", _getter, d.name)
            if setters:
                _add_accessor(cls, "set", _setter, d.name)
        own_defaults = defaults(declarations)
        if own_defaults:
            base_init = cls.__init__

            @functools.wraps(base_init)
            def __init__(self, *args, **kwargs):
                base_init(self, *args, **kwargs)
                self._setDefault(**own_defaults)  # a default never replaces a value the keywords set

            cls.__init__ = __init__
        cls._declared = tuple(declarations)
        return cls

    return decorate


def declared_estimator(declarations: Sequence[Declared]):
    """A class decorator for an estimator: ``declares`` its ``declarations`` with a setter for each, and an
    ``__init__`` taking them as keyword arguments (pyspark.ml's ``keyword_only``), whose signature lists them in
    order with their defaults (None: the Param has none), as ``help()`` and ``inspect.signature`` show it; a
    keyword that names no Param is a TypeError, as it is for pyspark.ml's estimators."""

    def decorate(cls):
        cls = declares(*declarations, setters=True)(cls)
        instance = cls()
        keyword = inspect.Parameter.KEYWORD_ONLY
        parameters = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)] + [
            inspect.Parameter(
                d.name, keyword, default=instance.getOrDefault(d.name) if instance.hasDefault(d.name) else None
            )
            for d in declarations
        ]
        names = {d.name for d in declarations}
        base_init = cls.__init__

        @functools.wraps(base_init)
        def __init__(self, *args, **kwargs):
            unknown = next((k for k in kwargs if k not in names), None)
            if unknown is not None:
                raise TypeError(f"{cls.__name__}.__init__() got an unexpected keyword argument {unknown!r}")
            base_init(self, *args, **kwargs)

        __init__.__signature__ = inspect.Signature(parameters, return_annotation=None)  # type: ignore[attr-defined]
        cls.__init__ = __init__
        return cls

    return decorate


@declares(*training.TRAINING, setters=True)
class HasTrainingParams(HasCheckpointInterval):
    """What every estimator trained by this library has: its strategy, device, storage precision, barrier
    tasks and checkpoints (``sparkml.params.training``). The Params of one solver are mixed in only by the
    estimators that can use it."""

    # <param-stubs>
    if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)

        def getStrategy(self) -> str: ...

        def setStrategy(self, value: str) -> Self: ...

        def getDevice(self) -> str: ...

        def setDevice(self, value: str) -> Self: ...

        def getDtype(self) -> str: ...

        def setDtype(self, value: str) -> Self: ...

        def getNumWorkers(self) -> int: ...

        def setNumWorkers(self, value: int) -> Self: ...

        def getCheckpointDir(self) -> str: ...

        def setCheckpointDir(self, value: str) -> Self: ...

        def setCheckpointInterval(self, value: int) -> Self: ...

    # </param-stubs>


@declares(*training.SOLVER_OPTIONS, setters=True)
class HasTorchTrainingParams(HasTrainingParams):
    """Every Param this library adds, for an estimator that can run every strategy (the linear models):
    ``HasTrainingParams`` plus the averaging, parameter-server and gossip Params."""

    # <param-stubs>
    if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)

        def getLocalIter(self) -> int: ...

        def setLocalIter(self, value: int) -> Self: ...

        def getStaleness(self) -> int: ...

        def setStaleness(self, value: int) -> Self: ...

        def getTopology(self) -> str: ...

        def setTopology(self, value: str) -> Self: ...

    # </param-stubs>


@declares(training.CLASS_WEIGHT, setters=True)
class HasClassWeight(Params):
    """``classWeight``: per-class weights, multiplied into ``weightCol`` (``data.class_weight``)."""

    # <param-stubs>
    if TYPE_CHECKING:  # made from the Params' declarations (tools/write_param_stubs.py)

        def setClassWeight(self, value: str | dict[float, float]) -> Self: ...

    # </param-stubs>

    def getClassWeight(self) -> str | dict[float, float] | None:
        """Gets the value of :py:attr:`classWeight`, or None when unset."""
        return self.getOrDefault("classWeight") if self.isDefined("classWeight") else None
