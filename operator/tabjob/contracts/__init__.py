"""What crosses a process boundary between the control side and the pods, declared once.

``pod``: the trainer pod's side of it (paths, variables, ports, labels, Kueue's keys, the image), a leaf that imports
nothing of tabjob but the package's version, so the builders, the trainer and serving all read it. ``plan``: the Plan
the pods read. ``results``: what the trainer reports back (``RunSummary``, ``ProgressSnapshot``, ``FitEvent``).
``scoring``: what a scoring pod reports back. Typed pydantic models, free of torch, imported by both sides; beyond the
pod contract they import only ``tabjob.families`` (a plan's model keys).
"""
