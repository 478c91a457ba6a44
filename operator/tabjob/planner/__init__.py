"""The planner: a pure function from a TabularJob spec to a Plan (README.md, "The resource hierarchy, made exact").

The operator publishes its result in a ConfigMap and sizes the pods from it, ``tabjob plan`` prints it,
``tabjob run`` and the trainer execute it: one planner, so what is reviewed is what runs.
"""

from __future__ import annotations

import math

from tabjob.api import FitResources, ModelConfig, TabularJob, TabularJobSpec
from tabjob.api.errors import SpecError
from tabjob.contracts.plan import Amount, ConcurrencyPlan, ConfigPlan, FitPlan, Plan, PodPlan, ReadingPlan
from tabjob.families import MODEL_KEYS, family
from tabjob.planner.concurrency import parallelism, peak_of
from tabjob.planner.hyperparameters import check_hyperparameters
from tabjob.planner.limits import capped_warnings, check_configmap, check_pod_count, check_spec_limits
from tabjob.planner.memory import estimate, processes_of, refusal, smallest_fitting
from tabjob.planner.placement import device_of, slot_places
from tabjob.planner.pods import cpu_pods, gpu_pods
from tabjob.planner.presets import preset_of, resolve
from tabjob.planner.refit import refit_plan
from tabjob.planner.resources import EPS, Res, bagged_model, budget, fit_resources
from tabjob.planner.rounds import first_slots
from tabjob.planner.search_space import trial_hyperparameters
from tabjob.planner.sharding import DataStats, reading_plan
from tabjob.planner.stacking import stack_plan

__all__ = ["DataStats", "plan", "plan_job"]


def plan_job(job: TabularJob, data: DataStats | None = None) -> Plan:
    return plan(job.spec, job.metadata.name, data)


def plan(spec: TabularJobSpec, job_name: str, data: DataStats | None = None) -> Plan:
    """The plan; with ``data`` (the training table's metadata) it also says how the table is read and refuses a
    pod that would not fit its memory (planner/memory.py)."""
    preset = preset_of(spec)
    spec, priority = resolve(spec, preset)  # the preset's portfolio and folds where the manifest names none
    check_spec_limits(spec)  # arithmetic only: a huge manifest is refused before any fit exists
    t, e = budget(spec), bagged_model(spec)
    resolved = _resolve_configs(spec, priority)
    configs = [c for c, _ in resolved]
    _check_search_space(spec, configs)
    check_hyperparameters(spec, resolved)
    stacking, stack_warnings = stack_plan(spec, preset is not None and preset.stack)
    refit, refit_warnings = refit_plan(spec, preset is not None and preset.refit, stacking is not None)

    peak = Res(max(c.peak.cpus for c in configs), max(c.peak.gpus for c in configs))
    gpus = math.ceil(peak.gpus - EPS)
    if gpus > 0:
        widest = max(configs, key=lambda c: c.processes)
        if widest.gpus == 0 and widest.processes > gpus:
            raise SpecError.at(
                f"{widest.field}.processes",
                f"a CPU data-parallel fit over {widest.processes} processes needs that many ranks, but this "
                f"GPU job has {gpus} (one per GPU); use processes <= {gpus}",
            )
        pods = gpu_pods(job_name, gpus, peak.cpus, spec.resources)
    else:
        world = max(c.slots * c.processes for c in configs)
        pods = cpu_pods(job_name, world, peak.cpus, spec.resources)
    check_pod_count(spec, len(pods))
    world = sum(p.procs for p in pods)

    first = first_slots(configs)
    fits = [f for c, model in resolved for f in _fits(spec, c, model, pods, world, first[c.order])]
    _check_pod_fit(spec, fits, pods)
    reading = reading_plan(fits, world, stacking, data, refit)
    top = max(configs, key=lambda c: c.trials_parallel * c.folds_parallel)
    requested = Amount(cpus=sum(p.cpus for p in pods), gpus=sum(p.gpus for p in pods))
    result = Plan(
        job_name=job_name,
        pods=pods,
        world_size=world,
        concurrency=ConcurrencyPlan(
            trials=top.trials_parallel,
            folds=top.folds_parallel,
            fits=top.trials_parallel * top.folds_parallel,
        ),
        peak=Amount(cpus=peak.cpus, gpus=peak.gpus),
        requested=requested,
        fits=fits,
        warnings=capped_warnings(
            _warnings(spec, t, e, peak, configs) + _reading_warnings(fits, reading) + stack_warnings + refit_warnings
        ),
        configs=configs,
        folds=spec.bagging.folds,
        sets=spec.bagging.sets,
        ensemble_size=spec.ensemble.size,
        time_limit_seconds=spec.time_limit_seconds,
        preset=preset.name if preset else None,
        infer_limit_ms_per1000_rows=spec.infer_limit_ms_per1000_rows,
        stacking=stacking,
        refit=refit,
        on_gpu_unavailable=spec.on_gpu_unavailable,
        gpu_resource=spec.resources.gpu_resource,
        reading=reading,
    )
    if data is not None:
        result = _check_memory(spec, job_name, result, data)
    check_configmap(spec, result)
    return result


def _reading_warnings(fits: list[FitPlan], reading: ReadingPlan) -> list[str]:
    if reading.mode == "whole" and any(f.processes > 1 for f in fits):
        return [f"data-parallel fits do not shard the table here: {reading.reason}"]
    return []


def _check_memory(spec: TabularJobSpec, job_name: str, result: Plan, data: DataStats) -> Plan:
    """The plan with its memory estimate, or a SpecError when a pod would not fit (planner/memory.py)."""
    memory = estimate(result, data)
    result = result.model_copy(update={"memory": memory})

    def replan(processes: int) -> Plan | None:
        try:
            return plan(_with_processes(spec, processes), job_name)
        except SpecError:
            return None

    if refusal(result, memory, None, None) is None:
        return result
    fitting = smallest_fitting(processes_of(result), replan, data)
    why = refusal(result, memory, fitting, spec.resources.memory)
    raise SpecError.at("spec.resources.memory", str(why))


def _with_processes(spec: TabularJobSpec, processes: int) -> TabularJobSpec:
    """``spec`` with every model config data-parallel over ``processes`` ranks, with a CPU per process at least."""
    models: dict[str, list[ModelConfig]] = {}
    for key, configs in spec.models.items():
        models[key] = []
        for i, c in enumerate(configs):
            given = c.resources or FitResources()
            gpus = float(processes) if given.gpus else given.gpus
            try:
                cpus = max(fit_resources(spec, key, i, c).cpus, processes)
            except SpecError:
                cpus = processes
            update = {"processes": processes, "resources": given.model_copy(update={"cpus": cpus, "gpus": gpus})}
            models[key].append(c.model_copy(update=update))
    bagging = spec.bagging
    if bagging.resources is not None and bagging.resources.cpus is not None:
        resources = bagging.resources.model_copy(update={"cpus": max(bagging.resources.cpus, processes)})
        bagging = bagging.model_copy(update={"resources": resources})
    update = {
        "models": spec.models.model_copy(update=models),
        "resources": spec.resources.model_copy(update={"cpus": max(spec.resources.cpus, processes)}),
        "bagging": bagging,
    }
    changed = spec.model_copy(update=update)
    changed.model_fields_set.update(update)
    return changed


def _resolve_configs(spec: TabularJobSpec, priority: list[str] | None) -> list[tuple[ConfigPlan, ModelConfig]]:
    """Each config's plan beside the spec entry it came from (its hyperparameters seed the trials), in run order:
    the manifest's (family by family), or a preset's ``priority`` (config names)."""
    t, e = budget(spec), bagged_model(spec)
    out: list[tuple[ConfigPlan, ModelConfig]] = []
    seen: dict[str, str] = {}
    problems: list[tuple[str, str]] = []
    entries = [(key, i, cfg) for key, configs in spec.models.items() for i, cfg in enumerate(configs)]
    if priority is not None:
        rank = {name: i for i, name in enumerate(priority)}
        entries.sort(key=lambda entry: rank[entry[2].name or ""])
    for key, i, cfg in entries:
        field = f"spec.models.{key}[{i}]"
        name = cfg.name or (key if i == 0 else f"{key}_{i + 1}")
        if name in seen or name == "WeightedEnsemble":
            problems.append((f"{field}.name", f"{name!r} is already used by {seen.get(name, 'the ensemble')}"))
            continue
        seen[name] = field
        try:
            r = fit_resources(spec, key, i, cfg)
        except SpecError as exc:
            problems.extend(exc.problems)
            continue
        p = parallelism(t, e, r, spec.bagging.folds, spec.tuning.trials)
        pk = peak_of(r, p)
        n_folds = max(spec.bagging.folds, 1) * (spec.bagging.sets if spec.bagging.folds else 1)
        out.append(
            (
                ConfigPlan(
                    name=name,
                    key=key,
                    order=len(out),
                    field=field,
                    cpus=r.cpus,
                    gpus=r.gpus,
                    processes=cfg.processes,
                    trials_parallel=p.trials,
                    folds_parallel=p.folds,
                    slots=p.fits,
                    fits=spec.tuning.trials * n_folds,
                    peak=Amount(cpus=pk.cpus, gpus=pk.gpus),
                ),
                cfg,
            )
        )
    if problems:
        raise SpecError(problems)
    return out


def _check_search_space(spec: TabularJobSpec, configs: list[ConfigPlan]) -> None:
    valid = set(MODEL_KEYS) | {c.name for c in configs}
    bad = [k for k in spec.tuning.search_space if k not in valid]
    if bad:
        raise SpecError(
            [
                (
                    f"spec.tuning.searchSpace.{k}",
                    f"no model key or config named so; use one of {sorted(valid)}",
                )
                for k in bad
            ]
        )


def _fits(
    spec: TabularJobSpec, c: ConfigPlan, cfg: ModelConfig, pods: list[PodPlan], world: int, first: int
) -> list[FitPlan]:
    """``first``: the slot the config's deal starts on (rounds.py: where its round's earlier configs left off)."""
    places = slot_places(c.slots, Res(c.cpus, c.gpus), c.processes, world)
    bagged = spec.bagging.folds >= 2
    folds: list[tuple[int, int | None]] = (
        [(b, f) for b in range(spec.bagging.sets) for f in range(spec.bagging.folds)] if bagged else [(0, None)]
    )
    out = []
    for trial in range(spec.tuning.trials):
        # What the fit trains with: the family's defaults under the config's (or the trial's) own values.
        params = family(c.key).effective(trial_hyperparameters(c.key, c.name, cfg, spec.tuning, trial))
        for index, (bag_set, fold) in enumerate(folds):
            if c.trials_parallel == 1:  # one deal over the trials, so the slots stay even across them
                slot = (first + trial * len(folds) + index) % c.folds_parallel
            else:
                slot = (trial % c.trials_parallel) * c.folds_parallel + index % c.folds_parallel
            place = places[slot]
            fold_id = f".s{bag_set}.f{fold}" if fold is not None else ""
            out.append(
                FitPlan(
                    id=f"{c.name}.t{trial}{fold_id}",
                    model=c.name,
                    key=c.key,
                    order=c.order,
                    trial=trial,
                    bag_set=bag_set,
                    fold=fold,
                    cpus=c.cpus,
                    gpus=c.gpus,
                    processes=c.processes,
                    rank=place.ranks[0],
                    ranks=place.ranks,
                    device=device_of(place.ranks[0], place.gpu, pods),
                    slot=slot,
                    hyperparameters=params,
                    seed=trial * 1000 + bag_set,
                )
            )
    return out


def _check_pod_fit(spec: TabularJobSpec, fits: list[FitPlan], pods: list[PodPlan]) -> None:
    """A fit's threads run inside one pod: with cpusPerPod set, its pod must hold them."""
    if spec.resources.cpus_per_pod is None or len(pods) == 1:
        return
    for fit in fits:
        per_process = fit.cpus // fit.processes
        pod = next(p for p in pods if p.first_rank <= fit.rank < p.first_rank + p.procs)
        if per_process > pod.cpus:
            raise SpecError.at(
                "spec.resources.cpusPerPod",
                f"{fit.model} needs {per_process} CPUs per process in one pod but pod {pod.name} holds "
                f"{pod.cpus}; raise cpusPerPod or lower the model's resources.cpus",
            )


def _warnings(spec: TabularJobSpec, t: Res, e: Res, peak: Res, configs: list[ConfigPlan]) -> list[str]:
    out = []
    if peak.cpus < t.cpus or peak.gpus < t.gpus - EPS:
        out.append(
            f"budget spec.resources is {t.cpus} CPUs / {t.gpus:g} GPUs but the plan uses at most "
            f"{peak.cpus} CPUs / {peak.gpus:g} GPUs at once; the pods request the peak, not the budget"
        )
    if spec.tuning.trials > 1 and all(c.trials_parallel == 1 for c in configs):
        out.append(f"{spec.tuning.trials} trials run one after another: the budget fits one trial at a time")
    for c in configs:
        if c.gpus == 0 and t.gpus > 0 and family(c.key).wants_gpu:
            out.append(f"{c.field} ({c.name}) trains on CPU although the job has GPUs")
    return out
