"""A search's Optuna study in a shared storage, so that a search begun by a process that died (or was
interrupted) goes on from its trials instead of starting over.

Each told trial carries what was timed (time or failure status) in its user attributes; a later
search of the same study reads them back into its ``RecordingObjective``, so no config is timed
twice and the budget counts what was already spent. Only one process searches a study at a time
(the claims in ``stuning.tuning.claims`` see to that), so a trial still running when the search
starts was in flight when its process died. An interrupted search fails its trial in flight instead
(``ModelOptunaSearch``), leaving no status: that config is timed again.
"""

from __future__ import annotations

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from stuning.tuning.search.base import STATUS_OK, RecordingObjective, Trial

TIME_ATTR, STATUS_ATTR, MESSAGE_ATTR = "time_us", "status", "message"
# A config in flight when its process died: it may be what killed the process, so it is not timed
# again (as failed configs are not); the search loses that one trial.
STATUS_CRASHED = "crashed"


def open_study(storage, name: str | None, sampler) -> optuna.Study:
    """The study ``name`` in ``storage`` (created if new); an in-memory one when ``storage`` is None."""
    if storage is None:
        return optuna.create_study(direction="minimize", sampler=sampler)
    return optuna.create_study(storage=storage, study_name=name, direction="minimize", sampler=sampler,
                               load_if_exists=True)


def trial_attrs(trial: Trial) -> dict:
    """What a told Optuna trial keeps of a timed config."""
    return {TIME_ATTR: trial.time_us if trial.ok else None, STATUS_ATTR: trial.status, MESSAGE_ATTR: trial.message}


def restore_trials(study: optuna.Study, config_type, objective: RecordingObjective, predicted: dict) -> list[Trial]:
    """The configs an earlier search of ``study`` timed, recorded in ``objective`` so none is timed again.

    ``predicted``: config -> predicted time of every config this search ranks; others (a config
    space that changed since) are left out. Returns the restored configs as trials of this search
    (their times and failures count as if timed now). A trial left running is failed in the study
    and recorded as ``crashed`` in ``objective`` only, so it is neither timed again nor stored as a
    failure of the config (the process may have died of something else).
    """
    out = []
    for frozen in study.get_trials(deepcopy=False):
        config = _config_of(frozen, config_type)
        if frozen.state == TrialState.RUNNING:
            study.tell(frozen.number, state=TrialState.FAIL)
            if config in predicted and config not in objective.results:
                objective.results[config] = Trial(config, None, STATUS_CRASHED, predicted.get(config),
                                                  "its process died while timing it")
            continue
        if STATUS_ATTR not in frozen.user_attrs or config not in predicted or config in objective.results:
            continue  # enqueued, pruned or interrupted (nothing timed under it), or not ranked now
        attrs = frozen.user_attrs
        time_us = attrs.get(TIME_ATTR) if attrs[STATUS_ATTR] == STATUS_OK else None
        trial = Trial(config, time_us, attrs[STATUS_ATTR], predicted.get(config), attrs.get(MESSAGE_ATTR, ""))
        objective.results[config] = trial
        out.append(trial)
    return out


def study_distributions(study: optuna.Study, wanted: dict[str, BaseDistribution]) -> dict[str, BaseDistribution]:
    """``wanted``, except where the study's trials already fixed a parameter's distribution: Optuna
    refuses to change one, and a resumed search may rank its survivors differently (another
    machine's database seeds it differently)."""
    fixed: dict[str, BaseDistribution] = {}
    for frozen in study.get_trials(deepcopy=False):
        for name, dist in frozen.distributions.items():
            fixed.setdefault(name, dist)
    return {name: fixed.get(name, dist) for name, dist in wanted.items()}


def _config_of(frozen: FrozenTrial, config_type):
    try:
        return config_type(**frozen.params)
    except (TypeError, ValueError):  # asked but not all parameters set before its process died
        return None
