"""The tables of ``benchmarks/auto_budget.py``'s rows (its ``--report-only``): per CPUs and split, auto against
AutoGluon and the path by hand, against the code before, each set of CPUs side by side, and the by-hand members."""

from __future__ import annotations

def group(r: dict) -> tuple:
    """The CPUs and split a row ran on: ``(cpus, split_seed)``, ``None`` for the whole machine / the set's own
    split (rows written before these options have neither)."""
    return r.get("cpus"), r.get("split_seed")


def _where(cpus: str | None, split_seed: int | None = None) -> str:
    return ("the whole machine" if cpus is None else f"taskset -c {cpus}") \
        + ("" if split_seed is None else f", split seed {split_seed}")


def _hand(rows: list[dict], name: str, cpus: str | None, split_seed: int | None) -> dict | None:
    """The path by hand of ``name`` on the same CPUs and split, else the whole machine's on that split, else any
    CPUs' (it has no time limit: its QWK stands for any; its row's ``cpus`` says where it ran)."""
    hands = [r for r in rows if r["kind"] == "by_hand" and r["set"] == name and r.get("split_seed") == split_seed]
    return next((r for r in hands if r.get("cpus") == cpus), None) \
        or next((r for r in hands if r.get("cpus") is None), None) or next(iter(hands), None)


def report(rows: list[dict]) -> None:
    """Per CPUs and split (:func:`_group`; one heading each when the rows hold more than one): the table of
    RESULTS.md (:func:`report_autogluon`) and, when the rows hold them, issue 46's (:func:`report_before`); then
    each set of CPUs side by side (:func:`report_cpus`) and the by-hand members' (:func:`report_members`)."""
    groups = sorted(dict.fromkeys(group(r) for r in rows if r["kind"] != "by_hand"),
                    key=lambda g: (g[1] is not None, g[1] or 0, g[0] is not None, str(g[0])))
    for cpus, split in groups:
        rs = [r for r in rows if group(r) == (cpus, split) and r["kind"] != "by_hand"]
        hands = [_hand(rows, n, cpus, split) for n in dict.fromkeys(r["set"] for r in rs)]
        rs += [h for h in hands if h]
        if len(groups) > 1:
            print(f"\n## On {_where(cpus, split)}\n")
        if any(r["kind"] in ("auto", "autogluon") for r in rs):
            report_autogluon(rs)
        report_before(rs)
    report_cpus(rows)
    report_members(rows)


def report_cpus(rows: list[dict]) -> None:
    """When the rows ran on more than one set of CPUs (``--cpus``): per split, set and budget, each set of CPUs' auto
    test QWK (nested OOF), wall seconds and budget used side by side, with its gap to the path by hand
    (:func:`_hand`) and to ``auto_before`` on the same CPUs, and auto on each pinned set minus auto on the whole
    machine."""
    new = [r for r in rows if r["kind"] == "auto"]
    cpus = sorted(dict.fromkeys(r.get("cpus") for r in new + [r for r in rows if r["kind"] == "auto_before"]),
                  key=lambda c: (c is not None, str(c)))
    if len(cpus) < 2:
        return

    def find(kind: str, name: str, b: float, c: str | None, split: int | None) -> dict | None:
        return next((r for r in rows if r["kind"] == kind and r["set"] == name and r["budget"] == b
                     and group(r) == (c, split)), None)

    def minus(x: dict | None, y: dict | None) -> str:
        return f"{x['test_qwk'] - y['test_qwk']:+.4f}" if x and y else "-"

    print("\n### auto on each set of CPUs side by side: test QWK (nested OOF), wall s, budget used; its gap to the "
          "path by hand and to the code before on the same CPUs\n")
    head = ["set", "split seed", "budget, s"]
    for c in cpus:
        head += [f"{_where(c)}: auto", f"{_where(c)}: auto − by hand", f"{_where(c)}: auto − before"]
    head += [f"auto on {_where(c)} − on the whole machine" for c in cpus if c is not None] if None in cpus else []
    print("| " + " | ".join(head) + " |")
    print("|---|---:|---:|" + "---|---:|---:|" * len(cpus) + "---:|" * (len(head) - 3 - 3 * len(cpus)))
    keys = dict.fromkeys((r.get("split_seed"), r["set"], r["budget"]) for r in new)
    for split, name, b in sorted(keys, key=lambda k: (k[0] is not None, k[0] or 0)):
        cells = [name, "own" if split is None else str(split), f"{b:g}"]
        for c in cpus:
            a = find("auto", name, b, c, split)
            cells += [f"{a['test_qwk']:.4f} ({a['nested_oof_qwk']:.4f}), {a['wall_seconds']:.0f}, {_used(a):.0%}"
                      if a else "-", minus(a, _hand(rows, name, c, split)),
                      minus(a, find("auto_before", name, b, c, split))]
        if None in cpus:
            whole = find("auto", name, b, None, split)
            cells += [minus(find("auto", name, b, c, split), whole) for c in cpus if c is not None]
        print("| " + " | ".join(cells) + " |")


def report_autogluon(rows: list[dict]) -> None:
    """The table of RESULTS.md: per set and budget, auto's test QWK and time against AutoGluon's presets, and at
    300 s the path by hand; then how each budget was kept."""
    budgets = sorted({r["budget"] for r in rows if r["kind"] == "auto"})
    presets = list(dict.fromkeys(r["preset"] for r in rows if r["kind"] == "autogluon"))
    print("| set | budget, s | auto: test QWK (nested OOF) | the same candidates re-blended (pool of each pair's best "
          "first) | auto: wall s | candidates finished / pruned / out of time (finished trials) | "
          + "".join(f"AutoGluon {p}: test QWK, s | " for p in presets) + "by hand: test QWK, s |")
    print("|---|---:|---|---|---:|---|" + "---|" * len(presets) + "---|")
    for name in dict.fromkeys(r["set"] for r in rows):
        hand = next((r for r in rows if r["kind"] == "by_hand" and r["set"] == name), None)
        for b in budgets:
            a = next((r for r in rows if r["kind"] == "auto" and r["set"] == name and r["budget"] == b), None)
            if a is None:
                continue
            ags = "".join(
                (lambda g: f"{g['test_qwk']:.4f}, {g['seconds']:.0f} | " if g else "- | ")(
                    next((r for r in rows if r["kind"] == "autogluon" and r["set"] == name and r["budget"] == b
                          and r["preset"] == p), None)) for p in presets)
            by_hand = f"{hand['test_qwk']:.4f}, {hand['wall_seconds']:.0f} |" if hand and b == 300 else " |"
            rb = next((r for r in rows if r["kind"] == "reblend" and r["set"] == name and r["budget"] == b), None)
            again = f" {rb['test_qwk']:.4f} ({rb['nested_oof_qwk']:.4f}) |" if rb else " |"
            print(f"| {name} | {b:g} | **{a['test_qwk']:.4f}** ({a['nested_oof_qwk']:.4f}) |{again} "
                  f"{a['wall_seconds']:.0f} | {a['finished']} / {a.get('pruned', 0)} / {a['stopped']} ({a['trials']}) | "
                  f"{ags}{by_hand}")
    autos = [r for r in rows if r["kind"] == "auto"]
    if autos:
        worst = max(autos, key=lambda r: r["wall_seconds"] / r["budget"])
        print(f"\nauto's wall time (the process, from outside) at most {worst['wall_seconds'] / worst['budget']:.0%} "
              f"of its budget ({worst['set']}, {worst['budget']:g} s); its own clock "
              f"{min(r['auto_seconds'] / r['budget'] for r in autos):.0%}-"
              f"{max(r['auto_seconds'] / r['budget'] for r in autos):.0%}")
        for p in presets:
            gaps = [a["test_qwk"] - g["test_qwk"] for a in autos for g in rows
                    if g["kind"] == "autogluon" and g.get("preset") == p and g["set"] == a["set"]
                    and g["budget"] == a["budget"]]
            if gaps:
                print(f"auto minus AutoGluon {p}: {min(gaps):+.4f} to {max(gaps):+.4f} over {len(gaps)} (set, budget)")
        hands = [(a["test_qwk"] - h["test_qwk"]) for a in autos if a["budget"] == 300 for h in rows
                 if h["kind"] == "by_hand" and h["set"] == a["set"]]
        if hands:
            print(f"auto at 300 s minus the path by hand: {min(hands):+.4f} to {max(hands):+.4f} over {len(hands)} sets")


def _used(r: dict) -> float:
    """The share of its budget an auto run's own clock used (``auto_seconds`` in rows before ``budget_used``)."""
    return r["budget_used"] if r.get("budget_used") is not None else r["auto_seconds"] / r["budget"]


def report_before(rows: list[dict], reach: float = 0.005, keep: float = 0.002, use: float = 0.9) -> None:
    """Issue 46's table, when the rows have ``auto_before`` runs or auto runs that recorded ``budget_used``: per set
    and budget, auto (the code that ran as ``auto``) and the code before (``auto_before``): test QWK (nested OOF),
    the share of the budget used (with the candidates left out or stopped for time), candidates finished /
    screened; the path by hand (one row per set, on each budget's line); the differences. Then the goals: at 300 s
    within ``reach`` of the path by hand on every set, never more than ``keep`` below the code before, at least
    ``use`` of the budget used where candidates were left."""
    new = [r for r in rows if r["kind"] == "auto"]
    before = [r for r in rows if r["kind"] == "auto_before"]
    if not before and not any("budget_used" in r for r in new):
        return

    def find(kind: str, name: str, budget: float | None = None) -> dict | None:
        return next((r for r in rows if r["kind"] == kind and r["set"] == name
                     and (budget is None or r["budget"] == budget)), None)

    def qwk(r: dict | None) -> str:
        return f"{r['test_qwk']:.4f} ({r['nested_oof_qwk']:.4f})" if r else "-"

    def used(r: dict | None) -> str:
        if r is None:
            return "-"
        left = r.get("left_candidates")
        return f"{_used(r):.0%}" + (f" ({left} left)" if left else "")

    def minus(x: dict | None, y: dict | None) -> str:
        if not (x and y):
            return "-"
        p = find("paired", x["set"], x["budget"]) if y["kind"] == "auto_before" else None
        return f"{x['test_qwk'] - y['test_qwk']:+.4f}" + (f" ± {p['se']:.4f}" if p else "")

    def commits(rs: list[dict]) -> str:
        return ", ".join(sorted({(r.get("commit") or "no commit") + ("+dirty" if r.get("dirty") else "")
                                 for r in rs})) or "-"

    where = {_where(*group(r)) for r in new + before}
    print(f"\n### Issue 46: auto ({commits(new)}) against the code before ({commits(before)}) and the path by hand"
          + (f", on {', '.join(sorted(where))}" if where and where != {_where(None)} else "") + "\n")
    print("| set | budget, s | auto: test QWK (nested OOF) | auto: budget used (candidates left) | auto: candidates "
          "finished / screened | before: test QWK (nested OOF) | before: budget used (candidates left) | "
          "by hand: test QWK, wall s | auto − by hand | auto − before |")
    print("|---|---:|---|---:|---|---|---:|---|---:|---:|")
    budgets = sorted({r["budget"] for r in new + before})
    for name in dict.fromkeys(r["set"] for r in new + before):
        hand = find("by_hand", name)
        for b in budgets:
            a, o = find("auto", name, b), find("auto_before", name, b)
            if a is None and o is None:
                continue
            on = (a or o).get("cpus")
            h = (f"{hand['test_qwk']:.4f}, {hand['wall_seconds']:.0f}"
                 + ("" if "catboost" in hand.get("engines", []) else " (no CatBoost)")
                 + ("" if hand.get("cpus") == on else f" (on {_where(hand.get('cpus'))})")) if hand else "-"
            done = (f"{a['finished']} / {a['screened'] if a.get('screened') is not None else '-'}") if a else "-"
            print(f"| {name} | {b:g} | {qwk(a)} | {used(a)} | {done} | {qwk(o)} | {used(o)} | {h} | {minus(a, hand)} | "
                  f"{minus(a, o)} |")
    print()
    gaps = {a["set"]: a["test_qwk"] - h["test_qwk"] for a in new if a["budget"] == 300
            for h in [find("by_hand", a["set"])] if h}
    if gaps:
        short = [n for n, g in gaps.items() if g < -reach]
        print(f"- at 300 s, auto − by hand: {min(gaps.values()):+.4f} to {max(gaps.values()):+.4f} over {len(gaps)} "
              f"sets; {len(gaps) - len(short)} of {len(gaps)} within {reach} (auto ≥ by hand − {reach})"
              + (f"; not: {', '.join(short)}" if short else ""))
    pairs = [(a, o) for a in new for o in [find("auto_before", a["set"], a["budget"])] if o]
    if pairs:
        worst = min(pairs, key=lambda p: p[0]["test_qwk"] - p[1]["test_qwk"])
        at300 = [a["test_qwk"] - o["test_qwk"] for a, o in pairs if a["budget"] == 300]
        below = sum(a["test_qwk"] - o["test_qwk"] < -keep for a, o in pairs)
        print(f"- auto − before: at least {worst[0]['test_qwk'] - worst[1]['test_qwk']:+.4f} ({worst[0]['set']}, "
              f"{worst[0]['budget']:g} s) over {len(pairs)} (set, budget)"
              + (f"; at 300 s at least {min(at300):+.4f}" if at300 else "")
              + f"; {below} more than {keep} below before")
    for label, rs in (("auto", new), ("before", before)):
        left = [r for r in rs if r.get("left_candidates")]
        if left:
            low = min(left, key=_used)
            print(f"- {label}: budget used where candidates were left: at least {_used(low):.0%} ({low['set']}, "
                  f"{low['budget']:g} s) over {len(left)} runs; {sum(_used(r) < use for r in left)} under {use:.0%}")
        elif rs and all("left_candidates" in r for r in rs):
            print(f"- {label}: no run left candidates")


def report_members(rows: list[dict]) -> None:
    """The by-hand multirun's runs (rows with ``members``): per set, each (engine, objective)'s nested out-of-fold
    QWK / test QWK and seconds; the best of each figure on a set in bold."""
    hands = [r for r in rows if r["kind"] == "by_hand" and r.get("members")]
    if not hands:
        return
    pairs = list(dict.fromkeys((m["engine"], m["objective"]) for h in hands for m in h["members"]))
    print("\n### The path by hand's runs: nested OOF QWK / test QWK, fit seconds (the best of each bold)\n")
    print("| set | " + " | ".join(f"{e} {o}" for e, o in pairs) + " |")
    print("|---|" + "---|" * len(pairs))

    def fig(v, best: bool) -> str:
        return "-" if v is None else f"**{v:.4f}**" if best else f"{v:.4f}"

    for h in hands:
        ms = {(m["engine"], m["objective"]): m for m in h["members"]}
        top = {k: max((m[k] for m in h["members"] if m.get(k) is not None), default=None)
               for k in ("qwk_thresholds_oof_nested", "qwk_thresholds")}
        cells = []
        for p in pairs:
            m = ms.get(p)
            if m is None:
                cells.append("-")
                continue
            nested, test = m.get("qwk_thresholds_oof_nested"), m.get("qwk_thresholds")
            cells.append(f"{fig(nested, nested is not None and nested == top['qwk_thresholds_oof_nested'])} / "
                         f"{fig(test, test is not None and test == top['qwk_thresholds'])}"
                         + (f", {m['seconds']:.0f} s" if m.get("seconds") is not None else ""))
        print(f"| {h['set']}" + (f" ({_where(h['cpus'])})" if h.get("cpus") is not None else "") + " | "
              + " | ".join(cells) + " |")
