"""griffe extension: the keyword defaults an estimator's ``__init__`` writes as ``...`` shown as their values.

Each default is written once, where its Param gets it; ``sparkml.base.params.with_signature_defaults`` fills the
signature in when the class is made, so ``help()`` shows the values. The API reference reads the source, where
they are ``...``: this extension imports the class and writes the values Python sees into the signature.
"""

import importlib
import inspect

import griffe


def _source(value):
    """``value`` as the source would write it (strings double-quoted, as the signatures' other defaults)."""
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"' if isinstance(value, str) else repr(value)


class SignatureDefaults(griffe.Extension):
    def on_function_instance(self, *, func, **kwargs):
        filled = [p for p in func.parameters if str(p.default) == "..."]
        if func.name != "__init__" or not filled or func.parent is None:
            return
        cls = getattr(importlib.import_module(func.parent.module.path), func.parent.name)
        values = inspect.signature(cls.__init__).parameters
        for parameter in filled:
            parameter.default = _source(values[parameter.name].default)
