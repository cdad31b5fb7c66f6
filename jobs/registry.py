"""The model registry side of `jobs.retrain`: versions with tags, the `champion` alias moved by
compare-and-set, and versions a killed run left undecided.

A registered model ``<name>`` holds one version per retraining run that was not a dry run. Its
``source`` is ``runs:/<run_id>/model``: the MLlib files the run logged (no pickle, no MLflow flavour;
`jobs.models` loads them back). Version tags (all strings):

| tag | value |
| --- | --- |
| ``sparkml.window`` | the window id the version was trained on |
| ``sparkml.data_fingerprint`` | sha256 of the window's rows (`datasets.fingerprint`) |
| ``sparkml.config_sha256`` | hash of the resolved config (`tracking.config_hash`) |
| ``sparkml.estimator`` | the estimator class, e.g. ``sparkml.classification.LogisticRegression`` |
| ``sparkml.metric.<name>`` | the candidate's holdout metrics; ``sparkml.champion_metric.<name>`` the champion's |
| ``sparkml.gate`` | ``passed`` or ``failed``; ``sparkml.gate_champion``: the version compared with ("" if none) |
| ``sparkml.decision`` | ``pending`` until decided, then ``promoted``, ``rejected``, ``lost`` or ``abandoned`` |
| ``sparkml.reason`` | one sentence: why |
| ``sparkml.owner`` | ``host:pid`` of the run that registered it; ``sparkml.registered_at``: epoch seconds |

Compare-and-set: MLflow's registry has no conditional alias update, so the move is made under a
lock, and the lock is the one atomic operation every MLflow store has: creating a registered model
whose name is taken fails. Inside the lock the alias is read again and moved only if it still points
at the version the gate compared with; otherwise the run lost the race and says so with both
versions. A lock left by a killed process is broken after ``lock_timeout_s`` (the lock is held for a
few registry calls, well under a second, so a stale lock means its holder died).

Undecided versions: a run registers its version as ``pending`` before it moves the alias, so a run
killed in between leaves a pending version and the alias where it was. The next run settles every
pending version whose owner is dead (same host and its pid gone, or registered more than
``pending_timeout_s`` ago): it *finishes* one that passed its gate against the champion that is still
in service (moves the alias to it), and *abandons* the others (the gate failed, or the champion moved
since), and says which.
"""

import os
import socket
import time

PREFIX = "sparkml."
DECISION, REASON, WINDOW = PREFIX + "decision", PREFIX + "reason", PREFIX + "window"
FINGERPRINT, CONFIG = PREFIX + "data_fingerprint", PREFIX + "config_sha256"
GATE, GATE_CHAMPION = PREFIX + "gate", PREFIX + "gate_champion"
OWNER, REGISTERED_AT = PREFIX + "owner", PREFIX + "registered_at"
PENDING = "pending"


def owner_id():
    """``host:pid`` of this process."""
    return f"{socket.gethostname()}:{os.getpid()}"


def _pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def owner_is_dead(tags, now, pending_timeout_s):
    """True when the run that registered a pending version can no longer decide it."""
    host, _, pid = tags.get(OWNER, "").rpartition(":")
    if host == socket.gethostname() and pid.isdigit():
        return not _pid_alive(int(pid))
    registered = float(tags.get(REGISTERED_AT, "0") or 0)
    return now - registered > pending_timeout_s


def _named(version):
    return f"version {version}" if version else "none"


class LostRace(Exception):
    """The alias moved between the gate and the promotion."""

    def __init__(self, expected, current, alias="champion"):
        super().__init__(f"{alias} moved from {_named(expected)} to {_named(current)}")
        self.expected, self.current = expected, current


class Registry:
    """One registered model and its alias, through an ``MlflowClient``."""

    def __init__(self, client, name, alias="champion", lock_timeout_s=120.0, pending_timeout_s=3600.0, poll_s=0.2):
        self.client, self.name, self.alias = client, name, alias
        self.lock_timeout_s, self.pending_timeout_s, self.poll_s = lock_timeout_s, pending_timeout_s, poll_s

    # -- reading -------------------------------------------------------------------------------
    def ensure_model(self):
        """Create the registered model if missing (concurrent creation by another run is fine)."""
        from mlflow.exceptions import MlflowException

        try:
            self.client.get_registered_model(self.name)
        except MlflowException:
            try:
                self.client.create_registered_model(self.name, tags={PREFIX + "managed_by": "sparkml.jobs.retrain"})
            except MlflowException:
                self.client.get_registered_model(self.name)  # created meanwhile; re-raise if not

    def champion(self):
        """The version the alias points at, or None."""
        from mlflow.exceptions import MlflowException

        try:
            return self.client.get_model_version_by_alias(self.name, self.alias)
        except MlflowException:
            return None

    def versions(self):
        """Every version of the model (all pages), oldest first."""
        out, token = [], None
        while True:
            page = self.client.search_model_versions(f"name = '{self.name}'", max_results=1000, page_token=token)
            out += list(page)
            token = getattr(page, "token", None)
            if not token:
                break
        return sorted(out, key=lambda v: int(v.version))

    def find(self, window, fingerprint, config_sha):
        """The newest version trained on this window with the same data and config, or None."""
        for v in reversed(self.versions()):
            t = v.tags
            if t.get(WINDOW) == window and t.get(FINGERPRINT) == fingerprint and t.get(CONFIG) == config_sha:
                return v
        return None

    # -- writing -------------------------------------------------------------------------------
    def register(self, run_id, tags):
        """A new version from the run's ``model`` artifacts, tagged ``pending`` (decided later)."""
        tags = {
            **{k: str(v) for k, v in tags.items()},
            DECISION: PENDING,
            OWNER: owner_id(),
            REGISTERED_AT: f"{time.time():.3f}",
        }
        return self.client.create_model_version(self.name, f"runs:/{run_id}/model", run_id, tags=tags)

    def decide(self, version, decision, reason):
        """Record the decision on a version (tags ``sparkml.decision`` and ``sparkml.reason``)."""
        self.client.set_model_version_tag(self.name, version, DECISION, decision)
        self.client.set_model_version_tag(self.name, version, REASON, reason)

    def promote(self, version, expected):
        """Move the alias to `version` if it still points at `expected` (a version string, or None for
        no champion). Raises `LostRace` otherwise; the alias is then unchanged."""
        with self.lock():
            current = self.champion()
            current = None if current is None else str(current.version)
            if current != (None if expected is None else str(expected)):
                raise LostRace(expected, current, self.alias)
            self.client.set_registered_model_alias(self.name, self.alias, str(version))

    # -- the lock ------------------------------------------------------------------------------
    def lock_name(self):
        return f"{self.name}_promotion_lock"  # a valid name in every registry, Unity Catalog included

    def lock(self):
        return _Lock(self)

    # -- recovery ------------------------------------------------------------------------------
    def settle_abandoned(self):
        """Decide every pending version whose run died; returns one sentence per version settled."""
        now, lines = time.time(), []
        for v in self.versions():
            if v.tags.get(DECISION) != PENDING or not owner_is_dead(v.tags, now, self.pending_timeout_s):
                continue
            gate_champion = v.tags.get(GATE_CHAMPION) or None
            if v.tags.get(GATE) != "passed":
                self.decide(v.version, "abandoned", "its run died before deciding; its gate had failed")
                lines.append(
                    f"version {v.version} (window {v.tags.get(WINDOW)}) was left undecided by a run "
                    "that died; its gate had failed: ignored (abandoned)"
                )
                continue
            try:
                self.promote(v.version, gate_champion)
            except LostRace as e:
                self.decide(v.version, "abandoned", f"its run died before promoting it and the {e}")
                lines.append(
                    f"version {v.version} (window {v.tags.get(WINDOW)}) was left undecided by a run "
                    f"that died; it passed its gate but the {e}: ignored (abandoned)"
                )
                continue
            self.decide(v.version, "promoted", "passed its gate; promoted by a later run after its own run died")
            lines.append(
                f"version {v.version} (window {v.tags.get(WINDOW)}) was left undecided by a run that "
                f"died; it passed its gate against {self.alias} {_named(gate_champion)}, still in "
                f"service: finished (now {self.alias})"
            )
        return lines


class _Lock:
    """The promotion lock: the registered model ``<name>_promotion_lock`` exists while it is held."""

    def __init__(self, registry):
        self.r = registry
        self.name = registry.lock_name()

    def __enter__(self):
        from mlflow.exceptions import MlflowException

        deadline = time.time() + self.r.lock_timeout_s + 30.0
        while True:
            try:
                self.r.client.create_registered_model(
                    self.name, tags={OWNER: owner_id(), REGISTERED_AT: f"{time.time():.3f}"}
                )
                return self
            except MlflowException:
                self._break_if_stale()
            if time.time() > deadline:
                raise TimeoutError(
                    f"could not take the registry lock {self.name!r} within {self.r.lock_timeout_s + 30:.0f} s"
                )
            time.sleep(self.r.poll_s)

    def _break_if_stale(self):
        from mlflow.exceptions import MlflowException

        try:
            held = self.r.client.get_registered_model(self.name)
        except MlflowException:
            return  # released meanwhile
        if owner_is_dead(held.tags, time.time(), self.r.lock_timeout_s):
            try:
                self.r.client.delete_registered_model(self.name)
            except MlflowException:
                pass

    def __exit__(self, *exc):
        from mlflow.exceptions import MlflowException

        try:
            self.r.client.delete_registered_model(self.name)
        except MlflowException:
            pass
        return False
