"""The settings of a study (``study:`` in a config), checked: its methods, blends, regimes and seeds."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping

from qwkboost.evaluation.stats import TESTS
from qwkboost.runs.peers import check_peer
from qwkboost.validation import check_bool, check_int, check_real

__all__ = ["MethodSpec", "StudySpec", "DECODERS", "TEST_SEED_OFFSET", "TUNED"]

#: How a cell's scores become classes: a thresholds method on the decoded score, or the most probable class.
DECODERS = ("round", "exact", "distribution", "nelder_mead", "argmax")
#: Seeds of a generated test split sit this far above the training seed.
TEST_SEED_OFFSET = 100_000


@dataclass(frozen=True)
class MethodSpec:
    """One method of a study.

    Attributes
    ----------
    name : str
    overrides : tuple of str
        Hydra overrides that make it (``objective=extended_qwk``, ``objective.params.hessian=gauss_newton``).
    decode : tuple of str
        Decoders it is scored with (:data:`DECODERS`).
    engines : tuple of str or None
        Engines it runs on; ``None``: every engine of the study.
    skip_engines : tuple of str
        Engines of the study it does not run on (``multiclass`` on CatBoost, which runs only single-score
        Python objectives).
    peer : str or None
        An outside model (:data:`qwkboost.runs.peers.PEERS`) instead of an engine and objective.
    members : tuple of str or None
        For a blend: the methods whose out-of-fold and test scores it blends, on the same
        regime, seed, engine and folds (:mod:`qwkboost.blending`).
    blend_method : str
        The blend's method (``weights``, ``mean``, ``rank_mean`` or ``vote``).
    tune_trials : int
        Optuna trials on the training folds before the cell trains (:mod:`qwkboost.study.tuning`); 0: the
        engine's configured parameters.
    tune_pruner : str
        The pruner of those trials.
    tune_seed : int or None
        The seed of those trials' folds and draws when the method is tuned once for every seed (the study's
        first seed); ``None``: each seed tunes with its own.
    """

    name: str
    overrides: tuple[str, ...] = ()
    decode: tuple[str, ...] = ("exact",)
    engines: tuple[str, ...] | None = None
    peer: str | None = None
    members: tuple[str, ...] | None = None
    blend_method: str = "weights"
    skip_engines: tuple[str, ...] = ()
    tune_trials: int = 0
    tune_pruner: str = "successive_halving"
    tune_seed: int | None = None

    @property
    def is_blend(self) -> bool:
        return self.members is not None

    @property
    def objective(self) -> str | None:
        if self.is_blend:
            return "blend"
        for o in self.overrides:
            if o.startswith("objective="):
                return o.split("=", 1)[1]
        return None


@dataclass(frozen=True)
class StudySpec:
    """The settings of ``study:`` in a config (``conf/experiment/study.yaml``), checked."""

    seeds: int
    first_seed: int
    regimes: tuple[str, ...]
    engines: tuple[str, ...]
    methods: tuple[MethodSpec, ...]
    n_jobs: int
    max_train: int | None
    max_test: int | None
    cache_dir: str
    confidence: float
    alpha: float
    reference: str
    log_children: bool
    sizes: tuple[int | None, ...] = (None,)
    test: str = "wilcoxon"

    @classmethod
    def from_config(cls, study: Mapping[str, Any]) -> "StudySpec":
        from qwkboost.engines import ENGINES  # slow to import: scipy
        from qwkboost.engines.threads import available_cores  # slow to import: scipy

        known = {"seeds", "first_seed", "regimes", "engines", "methods", "only", "n_jobs", "cap", "cache_dir",
                 "confidence", "alpha", "reference", "log_children", "tuning", "sizes", "test"}
        unknown = sorted(set(study) - known)
        if unknown:
            raise ValueError(f"study: unknown key(s) {unknown}; known: {sorted(known)}")
        seeds = check_int(study.get("seeds", 20), "study.seeds", 1)
        first = check_int(study.get("first_seed", 0), "study.first_seed", 0, 2**31 - TEST_SEED_OFFSET - 1)
        regimes = tuple(study.get("regimes") or ())
        if not regimes or not all(isinstance(r, str) and r for r in regimes):
            raise ValueError(f"study.regimes must list data configs (e.g. [quartiles, label_shift]); got {regimes!r}")
        engines = tuple(study.get("engines") or ())
        bad = [e for e in engines if e not in ENGINES]
        if not engines or bad:
            raise ValueError(f"study.engines must list engines from {sorted(ENGINES)}; got {list(engines)!r}")
        methods = []
        raw = study.get("methods") or {}
        if not isinstance(raw, Mapping) or not raw:
            raise ValueError("study.methods must map method names to {overrides, decode[, engines][, peer]} or "
                             "{members, blend_method, decode}")
        for name, m in raw.items():
            if m is None:       # a method switched off with study.methods.NAME=null
                continue
            extra = sorted(set(m) - {"overrides", "decode", "engines", "skip_engines", "peer", "members",
                                     "blend_method"})
            if extra:
                raise ValueError(f"study.methods.{name}: unknown key(s) {extra}; known: overrides, decode, engines, "
                                 "skip_engines, peer, members, blend_method")
            skip = tuple(m.get("skip_engines") or ())
            if any(e not in ENGINES for e in skip):
                raise ValueError(f"study.methods.{name}.skip_engines must be engines from {sorted(ENGINES)}")
            decode = tuple(m.get("decode") or ("exact",))
            bad = [d for d in decode if d not in DECODERS]
            if bad:
                raise ValueError(f"study.methods.{name}.decode: {bad} unknown; choose from {list(DECODERS)}")
            peer = m.get("peer")
            if peer is not None:
                check_peer(peer)
                if m.get("overrides"):
                    raise ValueError(f"study.methods.{name}: a peer takes no overrides")
            m_engines = None if m.get("engines") is None else tuple(m["engines"])
            if m_engines is not None and any(e not in ENGINES for e in m_engines):
                raise ValueError(f"study.methods.{name}.engines must be engines from {sorted(ENGINES)}")
            members = m.get("members")
            if members is not None:
                members = (members,) if isinstance(members, str) else tuple(members)
                spec = MethodSpec(str(name), (), decode, m_engines, None, members,
                                  str(m.get("blend_method", "weights")), skip)
                methods.append(spec)
                continue
            if m.get("blend_method") is not None:
                raise ValueError(f"study.methods.{name}.blend_method needs members (the methods it blends)")
            spec = MethodSpec(str(name), tuple(m.get("overrides") or ()), decode, m_engines, peer, skip_engines=skip)
            if peer is None and spec.objective is None:
                raise ValueError(f"study.methods.{name}.overrides must choose an objective (objective=...)")
            methods.append(spec)
        only = study.get("only")
        if only is not None:
            only = [only] if isinstance(only, str) else list(only)
            unknown = [m for m in only if m not in raw]
            if unknown or not only:
                raise ValueError(f"study.only: {unknown or only!r} not among study.methods ({', '.join(raw)})")
            methods = [m for m in methods if m.name in only]
        if not methods:
            raise ValueError("study.methods: every method is switched off")
        _check_blends(methods)
        methods = _tuned_variants(methods, study.get("tuning"), first, engines, list(raw))
        cap = study.get("cap") or {}
        if not isinstance(cap, Mapping) or set(cap) - {"n_train", "n_test"}:
            raise ValueError(f"study.cap must be null or {{n_train: rows, n_test: rows}}; got {cap!r}")
        max_train, max_test = cap.get("n_train"), cap.get("n_test")
        n_jobs = available_cores() if study.get("n_jobs") is None else check_int(study["n_jobs"], "study.n_jobs", 1)
        return cls(seeds, first, regimes, engines, tuple(methods),
                   n_jobs,
                   None if max_train is None else check_int(max_train, "study.cap.n_train", 10),
                   None if max_test is None else check_int(max_test, "study.cap.n_test", 10),
                   str(study.get("cache_dir") or "outputs/study_cache"),
                   check_real(study.get("confidence", 0.95), "study.confidence", 0.5, 1.0, hi_open=True),
                   check_real(study.get("alpha", 0.05), "study.alpha", 0.0, 0.5, lo_open=True),
                   str(study.get("reference", "squared_error+exact")),
                   check_bool(study.get("log_children", True), "study.log_children"),
                   _sizes(study.get("sizes")), _test(study.get("test", "wilcoxon")))

    def engines_of(self, method: MethodSpec) -> tuple[str, ...]:
        """The engines ``method`` runs on: its own ``engines`` or the study's, without its ``skip_engines``."""
        return tuple(e for e in (method.engines or self.engines) if e not in method.skip_engines)

    @property
    def seed_list(self) -> list[int]:
        return list(range(self.first_seed, self.first_seed + self.seeds))

    def regime_name(self, regime: str, size: int | None) -> str:
        """A regime's label: its data config, and ``@<rows>`` (``@all``) when the study runs several sizes."""
        if len(self.sizes) == 1:
            return regime
        return f"{regime}@{'all' if size is None else size}"


def _sizes(sizes) -> tuple[int | None, ...]:
    """``study.sizes``: training-set sizes each regime runs at (``data.n_train``; ``null``: all rows)."""

    if sizes is None:
        return (None,)
    sizes = [sizes] if isinstance(sizes, (int, str)) else list(sizes)
    if not sizes:
        raise ValueError("study.sizes must list training-set sizes (e.g. [1000, 5000, null]) or be null")
    out = tuple(None if v is None else check_int(v, "study.sizes", 10) for v in sizes)
    if len(set(out)) < len(out):
        raise ValueError(f"study.sizes repeats a size: {list(sizes)}")
    return out



#: The suffix of a method's tuned variant (``squared_error_tuned``).
TUNED = "_tuned"


def _tuned_variants(methods: list[MethodSpec], tuning: Mapping[str, Any] | None,
                    first_seed: int = 0, engines: tuple[str, ...] = (),
                    defined: list[str] | None = None) -> list[MethodSpec]:
    """``study.tuning``: ``{n_trials, pruner, variants, per_seed, methods, engines}``. With ``n_trials`` > 0,
    every method that trains on the study's engines (or those of ``methods``, on those of ``engines``; null: all)
    gets a tuned variant ``<name>_tuned`` with the same budget (a blend's tuned variant blends its members' tuned
    variants, so its members must be tuned too); ``variants`` keeps ``[default, tuned]`` (side by side) or one of
    them; ``per_seed: false`` (the default) tunes once, with the first seed, for every seed. Peers are never tuned
    (they bring their own defaults)."""
    from qwkboost.runs.tuning.pruners import DEFAULT_PRUNER, PRUNERS  # slow to import: optuna

    if not tuning:
        return methods
    keys = {"n_trials", "pruner", "variants", "per_seed", "methods", "engines"}
    if not isinstance(tuning, Mapping) or set(tuning) - keys:
        raise ValueError(f"study.tuning must be null or a mapping of {sorted(keys)}; got {tuning!r}")

    per_seed = check_bool(tuning.get("per_seed", False), "study.tuning.per_seed")
    n = check_int(tuning.get("n_trials", 0), "study.tuning.n_trials", 0)
    pruner = tuning.get("pruner", DEFAULT_PRUNER)
    if pruner not in PRUNERS:
        raise ValueError(f"study.tuning.pruner={pruner!r} is unknown; choose one of: {', '.join(PRUNERS)}")
    variants = tuning.get("variants") or ["default", "tuned"]
    variants = [variants] if isinstance(variants, str) else list(variants)
    if not variants or set(variants) - {"default", "tuned"}:
        raise ValueError(f"study.tuning.variants must list default and/or tuned; got {variants!r}")
    if n == 0:
        if "default" not in variants:
            raise ValueError("study.tuning.variants=[tuned] needs study.tuning.n_trials > 0")
        return methods
    taken = {m.name for m in methods}
    clash = sorted(m.name + TUNED for m in methods if m.name + TUNED in taken)
    if clash:
        raise ValueError(f"study.methods: {clash} would also name tuned variants; rename them")
    from qwkboost.engines import ENGINES  # slow to import: scipy

    # methods and engines the study leaves out (study.only, study.engines) are ignored, so either narrows a
    # study on the command line; names it never defined are refused
    own = [m.name for m in methods if m.peer is None]
    chosen = _names(tuning.get("methods"), defined or own, "study.tuning.methods", "study.methods")
    t_engines = _names(tuning.get("engines"), sorted(ENGINES), "study.tuning.engines", "the engines")
    peers = sorted({m.name for m in methods if m.peer is not None} & set(chosen))
    if peers and tuning.get("methods") is not None:
        raise ValueError(f"study.tuning.methods: {peers} are peers, which bring their own settings and are never tuned")
    for m in methods:
        missing = [x for x in (m.members or ()) if x not in chosen]
        if m.name in chosen and missing:
            raise ValueError(f"study.tuning.methods tunes the blend {m.name} but not its members {missing}; "
                             "tune them too or leave the blend out")
    out = [m for m in methods if "default" in variants or m.peer is not None or m.name not in chosen]
    if "tuned" in variants:
        for m in methods:
            if m.peer is not None or m.name not in chosen:
                continue
            members = tuple(x + TUNED for x in m.members) if m.is_blend else None
            skip = tuple(dict.fromkeys(m.skip_engines + tuple(e for e in engines if e not in t_engines)))
            out.append(replace(m, name=m.name + TUNED, members=members, tune_trials=0 if m.is_blend else n,
                               tune_pruner=pruner, tune_seed=None if per_seed else first_seed, skip_engines=skip))
    return out


def _test(value: Any) -> str:
    """``study.test``: the paired test of every comparison (:data:`qwkboost.evaluation.stats.TESTS`)."""

    if value not in TESTS:
        raise ValueError(f"study.test={value!r} is unknown; choose one of: {', '.join(TESTS)} "
                         "(wilcoxon needs 6 seeds or more to reach 5%; t assumes the differences are near normal)")
    return str(value)


def _names(value: Any, allowed: list[str], where: str, what: str) -> list[str]:
    """A list setting of names drawn from ``allowed`` (null: all of them)."""
    if value is None:
        return list(allowed)
    names = [value] if isinstance(value, str) else list(value)
    unknown = [x for x in names if x not in allowed]
    if unknown or not names:
        raise ValueError(f"{where}: {unknown or names!r} not among {what} ({', '.join(allowed)})")
    return names


def _check_blends(methods: list[MethodSpec]) -> None:
    """A blend names two or more of the study's own engine methods, is decoded by cut points, and blends by a
    known method."""
    from qwkboost.blending import BLEND_METHODS  # slow to import: scipy, scipy.optimize

    by_name = {m.name: m for m in methods}
    for m in methods:
        if not m.is_blend:
            continue
        where = f"study.methods.{m.name}"
        if m.blend_method not in BLEND_METHODS:
            raise ValueError(f"{where}.blend_method={m.blend_method!r} is unknown; choose one of: "
                             f"{', '.join(BLEND_METHODS)}")
        if len(set(m.members)) < 2:
            raise ValueError(f"{where}.members must name two or more methods; got {list(m.members)}")
        missing = [x for x in m.members if x not in by_name]
        if missing:
            raise ValueError(f"{where}.members: {missing} are not methods of this study (add them to study.only, "
                             f"or choose from {', '.join(n for n in by_name if not by_name[n].is_blend)})")
        odd = [x for x in m.members if by_name[x].is_blend or by_name[x].peer is not None]
        if odd:
            raise ValueError(f"{where}.members: {odd} are peers or blends; a blend takes methods that train on the "
                             "study's engines")
        bad = [d for d in m.decode if d == "argmax"]
        if bad:
            raise ValueError(f"{where}.decode: a blend is decoded by cut points (exact, nelder_mead, distribution "
                             "or round), not argmax")
