"""The champion gate of `jobs.retrain`: may a candidate model replace the one in service?

Each gated metric has a rule in MLflow's ``MetricThreshold`` vocabulary, evaluated the way
``mlflow.models.MetricThreshold`` defines it (candidate c, champion b, both measured on the same
holdout):

- ``greater_is_better`` (required): the direction of the metric.
- ``threshold``: an absolute floor (ceiling when lower is better): c >= threshold, or c <= threshold.
- ``min_absolute_change``: c >= b + min_absolute_change (c <= b - min_absolute_change when lower is
  better). Unlike MLflow, 0 is allowed: "at least as good as the champion".
- ``min_relative_change`` in [0, 1]: c >= b + min_relative_change * |b| (c <= b - ... when lower is
  better); with b = 0 it falls back to c > b (by 1e-10), as MLflow does.

Without a champion (the first run) only the thresholds apply. A candidate passes when every rule of
every gated metric passes; each failure is stated with both numbers, e.g.
``areaUnderROC 0.7012 is below the threshold 0.8500``.
"""

import math

from sparkml.jobs.config import ConfigError

RULE_KEYS = ("greater_is_better", "threshold", "min_absolute_change", "min_relative_change")
# Direction of the metrics jobs.train's evaluate computes, so a config may leave greater_is_better out.
KNOWN_DIRECTIONS = {
    "areaUnderROC": True,
    "accuracy": True,
    "f1": True,
    "r2": True,
    "logLoss": False,
    "rmse": False,
    "mae": False,
    "deviance": False,  # a generalized linear model's, on the holdout
}


class Rule:
    """One metric's thresholds (None: not checked)."""

    def __init__(self, metric, greater_is_better, threshold=None, min_absolute_change=None, min_relative_change=None):
        self.metric, self.greater_is_better = metric, greater_is_better
        self.threshold, self.min_absolute_change = threshold, min_absolute_change
        self.min_relative_change = min_relative_change

    def check(self, candidate, champion=None):
        """A result dict: the rule, both values, ``passed`` and ``failures`` (sentences with both numbers)."""
        failures = []
        if candidate is None or not math.isfinite(candidate):
            failures.append(f"{self.metric} of the candidate is {candidate!r}, not a number")
        else:
            failures += self._floor(candidate)
            if champion is not None and math.isfinite(champion):
                failures += self._change(candidate, champion)
        return {
            "metric": self.metric,
            "greater_is_better": self.greater_is_better,
            "candidate": candidate,
            "champion": champion,
            "threshold": self.threshold,
            "min_absolute_change": self.min_absolute_change,
            "min_relative_change": self.min_relative_change,
            "passed": not failures,
            "failures": failures,
        }

    def _better_or_equal(self, value, bound):
        return value >= bound if self.greater_is_better else value <= bound

    def _floor(self, c):
        if self.threshold is None or self._better_or_equal(c, self.threshold):
            return []
        side = "below" if self.greater_is_better else "above"
        return [f"{self.metric} {c:.4f} is {side} the threshold {self.threshold:.4f}"]

    def _change(self, c, b):
        sign = 1.0 if self.greater_is_better else -1.0
        word = "gain" if self.greater_is_better else "drop"
        out = []
        if self.min_absolute_change is not None and not self._better_or_equal(c, b + sign * self.min_absolute_change):
            out.append(
                f"{self.metric} {c:.4f} against the champion's {b:.4f}: a {word} of "
                f"{sign * (c - b):+.4f}, less than the required {self.min_absolute_change:.4f}"
            )
        if self.min_relative_change is not None:
            if b == 0:
                ok = self._better_or_equal(c, b + sign * 1e-10) and c != b
                needed = "any improvement on 0"
            else:
                ok = self._better_or_equal(c, b + sign * self.min_relative_change * abs(b))
                needed = f"{self.min_relative_change:.2%}"
            if not ok:
                change = sign * (c - b) / abs(b) if b else 0.0
                out.append(
                    f"{self.metric} {c:.4f} against the champion's {b:.4f}: a relative {word} of "
                    f"{change:+.2%}, less than the required {needed}"
                )
        return out


def parse(section, key="gate.metrics"):
    """Rules from the validated config's ``gate.metrics`` mapping ({metric: {rule keys}}); ConfigError
    naming the dotted key on a bad value."""
    rules = []
    for metric, spec in section.items():
        where = f"{key}.{metric}"
        if not isinstance(spec, dict):
            raise ConfigError(where, f"expected a mapping of {', '.join(RULE_KEYS)}, got {spec!r}")
        unknown = [k for k in spec if k not in RULE_KEYS]
        if unknown:
            raise ConfigError(f"{where}.{unknown[0]}", f"unknown key; expected one of {', '.join(RULE_KEYS)}")
        direction = spec.get("greater_is_better", KNOWN_DIRECTIONS.get(metric))
        known = KNOWN_DIRECTIONS.get(metric)
        if isinstance(direction, bool) and known is not None and direction is not known:
            raise ConfigError(
                f"{where}.greater_is_better",
                f"{metric} is {'higher' if known else 'lower'} when better; {str(direction).lower()} would invert "
                "the gate (leave greater_is_better out for this metric)",
            )
        if not isinstance(direction, bool):
            raise ConfigError(
                f"{where}.greater_is_better",
                f"required (true or false) for a metric other than {', '.join(KNOWN_DIRECTIONS)}",
            )
        values = {}
        for name in RULE_KEYS[1:]:
            value = spec.get(name)
            if value is not None and (
                isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
            ):
                raise ConfigError(f"{where}.{name}", f"expected a number, got {value!r}")
            values[name] = None if value is None else float(value)
        rel = values["min_relative_change"]
        if rel is not None and not 0.0 <= rel <= 1.0:
            raise ConfigError(f"{where}.min_relative_change", f"expected a number in [0, 1], got {rel}")
        if all(v is None for v in values.values()):
            raise ConfigError(where, "no threshold: set threshold, min_absolute_change or min_relative_change")
        rules.append(Rule(metric, direction, **values))
    return rules


def check_metrics_exist(rules, metric_names, task):
    """ConfigError when a gated metric is not one the job computes for this task (before training)."""
    for rule in rules:
        if rule.metric not in metric_names:
            raise ConfigError(
                f"gate.metrics.{rule.metric}",
                f"not a holdout metric of a {task} model (expected one of {', '.join(metric_names)})",
            )


def decide(rules, candidate, champion=None):
    """(passed, results): every rule checked against the candidate's and the champion's metrics."""
    results = [r.check(candidate.get(r.metric), None if champion is None else champion.get(r.metric)) for r in rules]
    return all(r["passed"] for r in results), results


def failures(results):
    """All failure sentences of a decision, in rule order."""
    return [f for r in results for f in r["failures"]]
