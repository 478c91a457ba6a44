"""tabjob: a Kubernetes operator for tabular machine learning on GPUs (control side).

This package never imports torch or lightgbm at import time: the operator image does not carry them.
"""

__version__ = "0.1.0"
