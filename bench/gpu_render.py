"""Render the GPU section of BENCHMARKS.md from gpu_*.json (bench/results/, or the folder `make gpu-check` wrote).

    python -m bench.gpu_render                   # print the section
    python -m bench.gpu_render --write           # replace it in BENCHMARKS.md, between its two markers
    python -m bench.gpu_render --results DIR     # read the JSON from DIR instead of bench/results
    python -m bench.gpu_render --failed NAME --exit-code N --results DIR   # record a benchmark that died

With no GPU results the section says so, and how to produce them; it never shows a figure no GPU run measured.
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from pathlib import Path
from typing import Any

from bench.common import RESULTS
from bench.gpu_common import nvidia_smi
from bench.sections import replace_between, write_section

BEGIN, END = "<!-- gpu-section:begin (python -m bench.gpu_render --write) -->", "<!-- gpu-section:end -->"
NAMES = ("gpu_lightgbm", "gpu_torch", "gpu_tabm", "gpu_packing")

WAITING = """\
**Waiting for a GPU machine.** No GPU run has been recorded yet, so this section has no figures. The benchmarks
are `bench/gpu_lightgbm.py` (LightGBM's CUDA learner against 16 CPU threads on a 1,000,000 x 50 table),
`bench/gpu_torch.py` (NN_TORCH on the GPU against the CPU, and AMP against fp32), `bench/gpu_tabm.py` (the same
for TabM) and `bench/gpu_packing.py`
(two `gpus: 0.5` fits packed onto one GPU against the same fits one after the other). To produce them:
`make gpu-wheels` where PyPI is reachable, then `make gpu-check` on the GPU machine (offline is fine; see
README.md, "GPU check"); copy the `gpu_*.json` it writes into `bench/results/` and run
`python -m bench.gpu_render --write`."""


def load(results: Path) -> dict[str, dict[str, Any]]:
    return {n: json.loads((results / f"{n}.json").read_text()) for n in NAMES if (results / f"{n}.json").exists()}


def _machine(r: dict[str, Any]) -> str:
    m = r["machine"]
    text = f"{m.get('gpu')} ({m.get('gpu_memory')}), driver {m.get('driver')}"
    if m.get("torch"):  # a failure record has only what nvidia-smi says
        text += (
            f", {m.get('cpus')} CPUs, torch {m.get('torch')} (CUDA {m.get('torch_cuda')}), LightGBM {m.get('lightgbm')}"
        )
    return text


def _exit_text(code: int) -> str:
    if code > 128 and code - 128 in signal.valid_signals():
        return f"exit {code} ({signal.Signals(code - 128).name})"
    return f"exit {code}"


def failure_record(name: str, code: int) -> dict[str, Any]:
    """What is known of a benchmark that died before writing its JSON: when, where, and how it ended."""
    return {
        "benchmark": name,
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": nvidia_smi(),
        "failed": _exit_text(code),
    }


def _failed(name: str, r: dict[str, Any]) -> list[str]:
    # `diagnosis` is added by hand after a look at the failure (the record itself only knows how it ended).
    diagnosis = f" {r['diagnosis']}" if r.get("diagnosis") else ""
    return [
        f"**`bench/{name}.py` failed** on {r['when']}: {r['failed']}, before it wrote a figure; "
        f"`gpu-check.log` of that run has the traceback.{diagnosis}",
        "",
    ]


def _lightgbm(r: dict[str, Any]) -> list[str]:
    cpu, cuda = r["cpu"], r["cuda"]
    return [
        f"**LightGBM CUDA vs CPU** (`bench/gpu_lightgbm.py`): plain `lightgbm.train`, {r['rows']:,} x {r['cols']}, "
        f"{r['rounds']} rounds, num_leaves {r['params']['num_leaves']}, Dataset built inside the timing, best of "
        "the alternating repeats.",
        "",
        "| device | seconds | holdout AUC |",
        "|---|---|---|",
        f"| CPU, {r['cpu_threads']} threads | {cpu['seconds']:.1f} | {cpu['auc_holdout']:.4f} |",
        f"| CUDA (`device_type=cuda`) | {cuda['seconds']:.1f} | {cuda['auc_holdout']:.4f} |",
        "",
        f"Speed-up **{r['speedup_cuda_vs_cpu']:.2f}x**.",
        "",
        *_preloaded(r),
    ]


def _preloaded(r: dict[str, Any]) -> list[str]:
    if not r["machine"].get("ld_preload"):
        return []
    return [
        "LightGBM's library was preloaded (`LD_PRELOAD`) in this run: `build_lightgbm.sh` found that this box's "
        'build crashes when numpy is loaded before it and trains when it is loaded first (README.md, "GPU check").',
        "",
    ]


def _network(r: dict[str, Any]) -> str:
    """The network's size in words; a record from before the family was recorded is NN_TORCH's."""
    family = r.get("family", "NN_TORCH")
    if family == "TABM":
        n = r["cpu"]["network"]
        return f"{n['arch_type']}, k = {n['k']}, {n['n_blocks']} blocks of {n['d_block']}, {n['n_bins']} bins"
    hp = r["hyperparameters"]
    return f"{hp['num_layers']} layers of {hp['hidden_size']}"


def _torch(r: dict[str, Any]) -> list[str]:
    hp = r["hyperparameters"]
    family = r.get("family", "NN_TORCH")
    script = "gpu_tabm" if family == "TABM" else "gpu_torch"
    rows = [
        f"**{family}: GPU vs CPU, AMP vs fp32** (`bench/{script}.py`): `tabjob run`, {r['rows']:,} x {r['cols']}, "
        f"{hp['num_epochs']} epochs, batch {hp['batch_size']}, {_network(r)}; "
        "samples/s = training rows x epochs / fit seconds.",
        "",
        "| variant | samples/s | fit s | precision | validation score |",
        "|---|---|---|---|---|",
    ]
    for key, label in (("gpu_amp", "GPU, AMP (default)"), ("gpu_fp32", "GPU, `amp: false`"), ("cpu", "CPU")):
        v = r[key]
        suffix = f", {r['cpu_threads']} threads" if key == "cpu" else ""
        rows.append(
            f"| {label}{suffix} | {v['samples_per_second']:,.0f} | {v['fit_seconds']:.1f} | {v['amp']} | "
            f"{v['score_val']:.4f} |"
        )
    rows += [
        "",
        f"GPU vs CPU **{r['speedup_gpu_vs_cpu']:.2f}x**; AMP vs fp32 **{r['speedup_amp_vs_fp32']:.2f}x**.",
        "",
    ]
    return rows


def _packing(r: dict[str, Any]) -> list[str]:
    p, s = r["packed"], r["sequential"]
    return [
        f"**Packing two 0.5-GPU fits** (`bench/gpu_packing.py`): a {r['folds']}-fold bagged NN_TORCH through "
        f"`tabjob run`, {r['rows']:,} x {r['cols']}, {r['cpus_per_fit']} CPUs per fit; training time from the "
        "first fit's start to the last fit's end.",
        "",
        "| variant | training s | sum of fit s | devices |",
        "|---|---|---|---|",
        f"| 2 x `gpus: 0.5` on one GPU, at once | {p['training_seconds']:.1f} | {p['sum_fit_seconds']:.1f} | "
        f"{', '.join(p['devices'])} |",
        f"| 2 x `gpus: 1`, one after the other | {s['training_seconds']:.1f} | {s['sum_fit_seconds']:.1f} | "
        f"{', '.join(s['devices'])} |",
        "",
        f"Speed-up of packing **{r['speedup_packed_vs_sequential']:.2f}x**.",
        "",
    ]


def render(results: Path = RESULTS) -> str:
    found = load(results)
    out = ["## GPU", ""]
    if not found:
        return "\n".join([*out, WAITING, ""])
    complete = [r for r in found.values() if "failed" not in r] or list(found.values())
    machines = sorted({_machine(r) for r in complete})
    dates = sorted(r["when"] for r in found.values())
    one_machine = len(machines) == 1
    if one_machine:
        when = f"{dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else "")
        out += [
            "Each figure is a ratio of two variants measured in the same run on the same machine: "
            + f"{machines[0]} (measured {when}).",
            "",
        ]
    else:
        out += [
            "Each figure is a ratio of two variants measured in the same run on the same machine; the benchmarks "
            "ran on different machines, each named under its figures.",
            "",
        ]
    parts = (("gpu_lightgbm", _lightgbm), ("gpu_torch", _torch), ("gpu_tabm", _torch), ("gpu_packing", _packing))
    for name, part in parts:
        if name in found:
            out += _failed(name, found[name]) if "failed" in found[name] else part(found[name])
            if not one_machine:
                out += [f"Measured on {_machine(found[name])}, {found[name]['when']}.", ""]
    missing = [n for n in NAMES if n not in found]
    if missing:
        out += [f"Not measured yet: {', '.join(f'`bench/{n}.py`' for n in missing)} (run `make gpu-check`).", ""]
    return "\n".join(out)


def replace_section(document: str, section: str) -> str:
    return replace_between(document, BEGIN, END, section)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--write", action="store_true", help="replace the section in BENCHMARKS.md")
    parser.add_argument("--failed", choices=NAMES, help="record that this benchmark died (with --exit-code)")
    parser.add_argument("--exit-code", type=int, default=1)
    args = parser.parse_args(argv)
    if args.failed:
        args.results.mkdir(parents=True, exist_ok=True)
        record = failure_record(args.failed, args.exit_code)
        (args.results / f"{args.failed}.json").write_text(json.dumps(record, indent=2))
        return
    section = render(args.results)
    if args.write:
        write_section(BEGIN, END, section)
    print(section)


if __name__ == "__main__":
    main()
