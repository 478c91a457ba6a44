"""Render the family comparison (bench/results/family_compare.json) into BENCHMARKS.md.

python -m bench.render_family_compare            # print the section
python -m bench.render_family_compare --write    # put it between its markers in BENCHMARKS.md
"""

from __future__ import annotations

import json
import sys
from typing import Any

from bench.common import RESULTS
from bench.sections import score_text, write_section

BEGIN = "<!-- family-compare:begin (python -m bench.render_family_compare --write) -->"
END = "<!-- family-compare:end -->"


def render(r: dict[str, Any]) -> str:
    tables = r["tables"]
    out = [
        f"`python -m bench.family_compare` ({r['when']}, 2 CPUs, 3 folds, each family's default "
        "config alone in one `tabjob run` per table; test rows neither saw; higher is better, rmse negated).",
        "",
        "| dataset | rows | metric | NN_TORCH test | TABM test | TABM - NN_TORCH | default LightGBM | NN_TORCH fit s | "
        "TABM fit s | load before |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    wins = 0
    for name, t in tables.items():
        nn, tm = t["families"]["NN_TORCH"], t["families"]["TABM"]
        gap = None if nn["score_test"] is None or tm["score_test"] is None else tm["score_test"] - nn["score_test"]
        wins += int(gap is not None and gap > 0)
        held = " (held out)" if t["group"] == "holdout" else ""
        out.append(
            f"| {name}{held} | {t['rows']:,} | {t['metric']} | {score_text(nn['score_test'])} | "
            f"{score_text(tm['score_test'])} | "
            f"{'-' if gap is None else f'{gap:+.4f}'} | {score_text(t['default_lightgbm_test'])} | "
            f"{nn['fit_seconds'] or 0:.1f} | {tm['fit_seconds'] or 0:.1f} | {t['load_before'][0]} |"
        )
    out += ["", f"TABM's test score above NN_TORCH's on **{wins} of {len(tables)}** tables."]
    return "\n".join(out)


def main() -> None:
    r = json.loads((RESULTS / "family_compare.json").read_text())
    section = render(r)
    if "--write" in sys.argv[1:]:
        write_section(BEGIN, END, section)
    else:
        print(section)


if __name__ == "__main__":
    main()
