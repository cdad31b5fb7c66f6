"""The retrain run's decision: register the candidate, move the alias when the gate passed, and say so.

``Promotion`` holds what a decision needs (the registry, the window) and turns a gate result into the
registry's writes (a new version with its tags, the alias moved by compare-and-set, the decision recorded on
the version and the run) and into the one line the job prints. A dry run writes nothing to the registry.
"""

from __future__ import annotations

import time

from sparkml.jobs import gate, registry
from sparkml.runtime import fault_injection


class Promotion:
    """The decision of one retrain run of model ``name`` on ``window`` (``registry``: a ``jobs.registry.Registry``)."""

    def __init__(self, registry, name, window, dry_run):
        self.registry, self.name, self.window, self.dry_run = registry, name, window, dry_run

    def already_done(self, version, lines):
        """The result of a run whose window is already registered with the same data and config."""
        t = version.tags
        decision, reason = t.get(registry.DECISION, "?"), t.get(registry.REASON, "")
        if decision == registry.PENDING:
            line = (
                f"{self.name} window {self.window}: version {version.version} with the same data and config "
                f"is being decided by another run ({t.get(registry.OWNER)}); nothing to do"
            )
        else:
            line = (
                f"{self.name} window {self.window}: already registered as version {version.version} with the "
                f"same data and config: {decision} ({reason}); nothing to do"
            )
        return {
            "outcome": "unchanged",
            "line": line,
            "version": str(version.version),
            "decision": decision,
            "reason": reason,
            "lines": lines,
        }

    def decide(self, tracked, passed, results, champ_ver, metrics, champ_metrics, tags):
        """Register (unless a dry run) and move the alias if the gate passed: (outcome, reason, version).
        ``tags``: the version's identifying tags (window, fingerprint, config, estimator)."""
        if passed:
            reason = (
                f"passed the gate against champion version {champ_ver}"
                if champ_ver
                else "passed the gate's thresholds (no champion yet)"
            )
        else:
            reason = "; ".join(gate.failures(results))
        if self.dry_run:
            tracked.client.set_tag(tracked.run_id, registry.DECISION, "dry_run")
            return "dry_run", ("would be promoted: " if passed else "would not be promoted: ") + reason, None
        tags = {
            **tags,
            registry.GATE: "passed" if passed else "failed",
            registry.GATE_CHAMPION: champ_ver or "",
            registry.REASON: reason,
        }
        tags.update({f"sparkml.metric.{k}": f"{v:.6g}" for k, v in metrics.items()})
        tags.update({f"sparkml.champion_metric.{k}": f"{v:.6g}" for k, v in (champ_metrics or {}).items()})
        version = str(self.registry.register(tracked.run_id, tags).version)
        fault_injection.pause("retrain-registered")
        if not passed:
            outcome = "rejected"
        else:
            try:
                self.registry.promote(version, champ_ver)
                outcome = "promoted"
            except registry.LostRace as e:
                outcome = "lost"
                reason = (
                    f"lost the promotion race: the {e} while this run's gate ran; version {version} "
                    f"passed its gate against version {champ_ver or 'none'} but is not promoted"
                )
        self.registry.decide(version, outcome, reason)
        tracked.client.set_tag(tracked.run_id, registry.DECISION, outcome)
        tracked.client.set_tag(tracked.run_id, "sparkml.model_version", version)
        return outcome, reason, version

    def line(self, outcome, reason, version, champ_ver, results):
        """The one line the job prints for the decision."""
        head = f"{self.name} window {self.window}"
        values = "; ".join(f"{r['metric']} {_fmt(r['candidate'])} vs champion {_fmt(r['champion'])}" for r in results)
        if outcome == "promoted":
            was = f"was version {champ_ver}" if champ_ver else "first champion"
            return f"{head}: promoted version {version} to {self.registry.alias} ({was}); {values}"
        if outcome == "rejected":
            stays = f"{self.registry.alias} stays version {champ_ver}" if champ_ver else f"no {self.registry.alias} yet"
            return f"{head}: not promoted: version {version} is registered, {stays}: {reason}"
        if outcome == "lost":
            return f"{head}: {reason}"
        return f"{head} (dry run, nothing registered): {reason}; {values}"


def champion_metrics(metrics):
    """The champion's holdout metrics as MLflow metrics of the candidate's run (``champion_<name>``)."""
    from mlflow.entities import Metric

    now = int(time.time() * 1000)
    return [Metric(f"champion_{k}", float(v), now, 0) for k, v in (metrics or {}).items()]


def _fmt(v):
    return "-" if v is None else f"{v:.4f}"
