"""What crosses a process boundary between the control side and the trainer, declared once.

``pod``: the trainer pod's side of it (paths, variables, ports, labels, Kueue's keys, the image). The plan and the
trainer's reports are typed models of their own (``tabjob.plan_model``, ``tabjob.results_model``). A leaf: it
imports nothing of tabjob but the package's version, so the builders, the trainer and serving all read it.
"""
