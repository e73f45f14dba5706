"""Screening, settings at their edges, and ``qwkboost.auto`` from a script (groups ``screening``, ``settings``,
``api``)."""

from __future__ import annotations

import re

from .harness import ONE, PY, TWO, V, judge_run, last_err, n_finished, raw_signs, refusal, started
from .registry import Ctx, case, refusal_case


# ---- screening

def _screen_case(name, good, T, pairs, extra, check=None, needs=(), expect=("good",)):
    @case(name, "screening", good, needs=needs, expect=expect)
    def _(c: Ctx):
        out = c.dir / "out"
        r = c.run(c.auto(out, T, pairs, extra))
        v = judge_run(r, c.dir, out)
        if v["verdict"] == "good" and check:
            v = check(r) or v
        if v["verdict"] == "good":
            v["detail"] = f"{n_finished(out)} finished, {len(re.findall('auto: screened', r.out))} screened"
        return v


_screen_case("screening-always", "auto.screen=always: exit 0, submission.csv, 'screened' lines", 30, TWO,
             ["auto.screen=always"],
             check=lambda r: None if "auto: screened" in r.out else V("silent", "auto.screen=always screened nothing",
                                                                      r))
_screen_case("screening-never", "auto.screen=never: exit 0, submission.csv, no screen", 30, TWO, ["auto.screen=never"],
             check=lambda r: V("silent", "auto.screen=never screened", r) if "auto: screened" in r.out else None)
_screen_case("screening-catboost", "auto.engines=[lightgbm,catboost]: exit 0, submission.csv", 40,
             (["lightgbm", "catboost"], ["squared_error"]), [], needs=("catboost",))
_screen_case("screening-always-catboost", "auto.engines=[lightgbm,xgboost,catboost] auto.screen=always: exit 0, "
             "submission.csv", 35, (["lightgbm", "xgboost", "catboost"], ["squared_error", "extended_qwk"]),
             ["auto.screen=always"], needs=("catboost",))
_screen_case("screening-never-catboost-only", "auto.engines=[catboost] auto.screen=never: exit 0, submission.csv "
             "(the first candidate always returns a complete run)", 30, (["catboost"], ["squared_error"]),
             ["auto.screen=never"], needs=("catboost",))
_screen_case("screening-every-engine", "no auto.engines or auto.objectives (every engine and objective) at 45 s: "
             "exit 0, submission.csv", 45, (None, None), [])
_screen_case("screening-always-cluster", "cluster=local auto.screen=always: exit 0, submission.csv", 40, TWO,
             ["cluster=local", "auto.screen=always"], needs=("dask",))
_screen_case("screening-tiny-budget", "auto.time_limit=12 auto.screen=always: exit 0 with submission.csv, or refused "
             "in one line as too short", 12, TWO, ["auto.screen=always"], expect=("good", "refused"))
refusal_case("screening-bogus", "screening", "auto.screen=sometimes: refused in one line naming auto.screen",
             lambda c, out: c.auto(out, 30, TWO, ["auto.screen=sometimes"]), names="screen")


# ---- settings at their edges

for _name, _value, _good in [
        ("zero", "0", "refused in one line"), ("nan", "nan", "refused in one line"),
        ("inf", "inf", "refused in one line (an endless budget)"), ("word", "ten", "refused in one line"),
        ("tiny", "2", "refused in one line with the least that can start a candidate")]:
    refusal_case(f"settings-time-limit-{_name}", "settings", f"auto.time_limit={_value}: {_good}",
                 lambda c, out, v=_value: [a if not str(a).startswith("auto.time_limit=") else f"auto.time_limit={v}"
                                           for a in c.auto(out, 30, ONE)], names="time_limit")
refusal_case("settings-engines-empty", "settings", "auto.engines=[]: refused in one line naming auto.engines",
             lambda c, out: [*c.auto(out, 25, (None, ["squared_error"])), "auto.engines=[]"], names="engines")
refusal_case("settings-engine-unknown", "settings", "auto.engines=[lightgbm,gbm]: refused in one line naming the "
             "engine", lambda c, out: c.auto(out, 25, (["lightgbm", "gbm"], ["squared_error"])), names="gbm")


@case("settings-engines-duplicate", "settings", "auto.engines=[lightgbm,lightgbm]: each candidate once (exit 0, "
      "submission.csv), or refused in one line", expect=("good", "refused"))
def _(c: Ctx):
    out = c.dir / "out"
    r = c.run(c.auto(out, 25, (["lightgbm", "lightgbm"], ["squared_error"])))
    v = refusal(r)
    if v is not None:
        return v
    twice = started(r).count("lightgbm-squared_error")
    return V("silent", f"lightgbm-squared_error started {twice} times", r) if twice > 1 else judge_run(r, c.dir, out)


# ---- api: qwkboost.auto from a script

API_SCRIPT = """\
import pandas as pd
import qwkboost as qb

train = pd.read_csv({train!r})
test = pd.read_csv({test!r})
{guard}result = qb.auto(train.drop(columns="score"), train["score"], test, id="id", time_limit=20,
{indent}                 engines=["lightgbm"], cluster="local", output_dir={out!r}, tracking_uri={store!r})
{indent}print(result.leaderboard[["candidate", "status", "worker"]].to_string(index=False))
"""


def _api_case(name, guard, good, expect):
    @case(name, "api", good, expect=expect, needs=("dask",))
    def _(c: Ctx):
        out = c.dir / "out"
        script = c.dir / "auto_script.py"
        script.write_text(API_SCRIPT.format(train=str(c.train), test=str(c.test), out=str(out), store=c.store,
                                            guard='if __name__ == "__main__":\n    ' if guard else "",
                                            indent="    " if guard else ""))
        r = c.run([PY, script], timeout=90)
        if r.timed_out:
            return V("hang", f"no end within {r.seconds:.0f} s", r)
        why = raw_signs(r)
        if why:
            return V("raw", why, r)
        if r.rc == 0:
            return judge_run(r, c.dir, out)
        lines = [l for l in r.err.splitlines() if l.strip()]
        if len(lines) <= 5 and "__main__" in r.err:
            return V("refused", lines[-1][:200], r)
        return V("raw", f"exit {r.rc}, {len(lines)} lines on stderr: {last_err(r)[:160]}", r)


_api_case("api-no-main-guard", False, "a script calling qb.auto(..., cluster='local') at module level, no `if "
          "__name__ == '__main__':`: it works (exit 0, submission.csv), or says in one line (stderr under 5 lines, no "
          "traceback) that the call must be under `if __name__ == '__main__':`", ("good", "refused"))
_api_case("api-main-guard", True, "the same script under `if __name__ == '__main__':`: exit 0, submission.csv",
          ("good",))

