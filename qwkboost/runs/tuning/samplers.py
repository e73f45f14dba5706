"""Samplers of a study, each seeded per trial so that resumed and parallel studies stay reproducible.

=========  ======================================================================================================
``tpe``    Optuna's TPE, ``multivariate=True`` (the parameters drawn jointly: learning rate and tree size
           interact) and ``constant_liar=True`` (parallel workers see each other's running trials as bad, so
           they do not draw the same region); the default
``gp``     Optuna's ``GPSampler`` (a Gaussian process; it needs PyTorch)
``cmaes``  Optuna's ``CmaEsSampler`` (CMA-ES; it needs the ``cmaes`` package)
``random`` uniform draws: the baseline every other sampler must beat
=========  ======================================================================================================
"""

from __future__ import annotations

import importlib.util
import warnings
from typing import Callable

import numpy as np
import optuna

__all__ = ["TrialSeededSampler", "SAMPLERS", "make_sampler"]

SAMPLERS = ("tpe", "gp", "cmaes", "random")


class TrialSeededSampler(optuna.samplers.BaseSampler):
    """A sampler made anew for every trial, seeded from ``(seed, trial number)`` (TPE by default).

    One sampler with a fixed seed replays the same random draws in every process that opens the study: a
    resumed study repeated trial 0, and two parallel workers drew identical pairs. Trial numbers are unique
    within a study, so seeding by them gives every trial its own draws, reproducibly. The samplers read the
    history from the study itself, so a new instance per trial loses nothing.

    Parameters
    ----------
    seed : int
    factory : callable, optional
        ``factory(trial_seed)`` -> a sampler; default Optuna's TPE with ``tpe_kwargs``.
    """

    def __init__(self, seed: int, factory: Callable[[int], optuna.samplers.BaseSampler] | None = None,
                 **tpe_kwargs):
        self.seed = int(seed)
        self._factory = factory or (lambda s: optuna.samplers.TPESampler(seed=s, **tpe_kwargs))
        self._by_trial: dict[int, optuna.samplers.BaseSampler] = {}

    def _for(self, trial) -> optuna.samplers.BaseSampler:
        s = self._by_trial.get(trial.number)
        if s is None:
            trial_seed = int(np.random.SeedSequence([self.seed, trial.number]).generate_state(1)[0])
            s = self._by_trial[trial.number] = self._factory(trial_seed)
        return s

    def infer_relative_search_space(self, study, trial):
        return self._for(trial).infer_relative_search_space(study, trial)

    def sample_relative(self, study, trial, search_space):
        return self._for(trial).sample_relative(study, trial, search_space)

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._for(trial).sample_independent(study, trial, param_name, param_distribution)

    def before_trial(self, study, trial):
        self._for(trial).before_trial(study, trial)

    def after_trial(self, study, trial, state, values):
        s = self._by_trial.pop(trial.number, None)
        if s is not None:
            s.after_trial(study, trial, state, values)

    def reseed_rng(self):
        """Nothing to do: every trial's draws are already fixed by its number."""


def make_sampler(name: str, seed: int) -> TrialSeededSampler:
    """The sampler ``tune.sampler`` names, seeded per trial (see the module's table).

    Raises
    ------
    ValueError
        For an unknown name, or a sampler whose package is not installed (naming what to install).
    """

    if name == "tpe":
        return TrialSeededSampler(seed, multivariate=True, constant_liar=True)
    if name == "random":
        return TrialSeededSampler(seed, lambda s: optuna.samplers.RandomSampler(seed=s))
    if name == "cmaes":
        if importlib.util.find_spec("cmaes") is None:
            raise ValueError("tune.sampler=cmaes needs the cmaes package: pip install cmaes")
        return TrialSeededSampler(seed, lambda s: optuna.samplers.CmaEsSampler(seed=s, warn_independent_sampling=False))
    if name == "gp":
        if importlib.util.find_spec("torch") is None:
            raise ValueError("tune.sampler=gp needs PyTorch (Optuna's GPSampler): pip install torch")

        def gp(s):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.samplers.GPSampler(seed=s)
        return TrialSeededSampler(seed, gp)
    raise ValueError(f"tune.sampler={name!r} is unknown; choose one of: {', '.join(SAMPLERS)}")
