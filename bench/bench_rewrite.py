"""Key rewriting under hostile regexps: what a tenant's rule list can cost the operator.

Pure, no control plane: the same code the operator runs (reconcile/rendering/rewrite.py, RE2 through
google-re2, models/keyrewrite.py's options). For each hostile pattern:

- RE2, one rule, on 253-character keys (the longest data key; three shapes: ``a…!``, ``a-a-…``,
  ``A_A_…``): the median time of ``--repeat`` rewrites of one key;
- RE2, the whole allowed chain: the pattern repeated as 32 rules (MAX_RULES) on each key;
- Python's ``re`` (backtracking), one rule on ``a`` * n + ``!`` for n = 8, 10, … 252, stopped at the first n
  over ``--re-budget`` seconds: why the operator does not use it.

Then the worst case per SecretSync: ``--keys`` keys of 253 characters through 32 rules of the
slowest RE2 pattern, per source (the budget the event loop spends; at most 20 sources).

Run: ``.venv/bin/python bench/bench_rewrite.py [--repeat 200 --keys 1000 --re-budget 1]``
(about ten seconds). Clocks: ``time.perf_counter()`` in this process, on one core.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import statistics
import time

from secretferry.models import keyrewrite
from secretferry.reconcile import problems
from secretferry.reconcile.rendering import rewrite

HOSTILE = [
    r"(a+)+$",
    r"(a|aa)*x",
    r"(a|a)*x",
    r"(.*a){20}x",
    r"\w*\w*\w*\w*\w*\w*\w*\w*!",
    r"[a-z]*[a-z]*[a-z]*[a-z]*[a-z]*x",
    r"[^a]{20}[^b]{20}[^c]{20}x",  # near MAX_PROGRAM_SIZE (larger counted repeats are refused)
    r"-",
]
KEYS = {"a…!": "a" * 252 + "!", "a-a-…": "a-" * 126, "A_A_…": "A_" * 126}


def _rules(pattern: str, count: int) -> list[keyrewrite.RewriteRule]:
    rule = keyrewrite.RewriteRule.model_validate({"regexp": {"source": pattern, "target": "y"}})
    return [rule] * count


def _median_s(rules: list[keyrewrite.RewriteRule], key: str, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        with contextlib.suppress(problems.Problem):  # a chain may grow the key past 253: it stops
            rewrite.rewrite_key(key, rules)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _python_re(pattern: str, budget_s: float) -> str:
    compiled = re.compile(pattern)
    last = ""
    for n in range(8, 254, 2):
        start = time.perf_counter()
        compiled.sub("y", "a" * n + "!")  # "!": a tail that makes every attempt fail late
        took = time.perf_counter() - start
        last = f"n={n}: {took * 1000:.2f} ms"
        if took > budget_s:
            return last + " (stopped)"
    return last


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=200, help="rewrites per median (200)")
    parser.add_argument("--keys", type=int, default=1000, help="keys in the worst-case source (1000)")
    parser.add_argument("--re-budget", type=float, default=1.0, help="stop Python re above this many s (1)")
    args = parser.parse_args()
    print(f"{'pattern':36} {'key':6} {'RE2 1 rule µs':>14} {'RE2 32 rules µs':>16}  Python re, one rule")
    slowest = ("", 0.0)
    for pattern in HOSTILE:
        for shape, key in KEYS.items():
            one = _median_s(_rules(pattern, 1), key, args.repeat)
            chain = _median_s(_rules(pattern, keyrewrite.MAX_RULES), key, args.repeat)
            if chain > slowest[1]:
                slowest = (pattern, chain)
            py = _python_re(pattern, args.re_budget) if shape == "a…!" else ""
            print(f"{pattern:36} {shape:6} {one * 1e6:14.1f} {chain * 1e6:16.1f}  {py}")
    rules = _rules(slowest[0], keyrewrite.MAX_RULES)
    secrets = {f"{i:04d}" + "A_" * 124 + "A": "v" for i in range(args.keys)}
    start = time.perf_counter()
    with contextlib.suppress(problems.Problem):
        rewrite.rewrite_keys(secrets, rules)
    took = time.perf_counter() - start
    print(f"\nworst source: {args.keys} keys x 253 chars x 32 rules of {slowest[0]!r}: {took * 1000:.1f} ms")


if __name__ == "__main__":
    main()
