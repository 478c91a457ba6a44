"""The tabjob trainer: runs a Plan's fits under torchrun and writes the leaderboard.

Runs inside the operator's pods and under ``tabjob run`` on one machine. It never imports kopf or kubernetes:
results travel through the output directory, the process group and the container termination message.
"""

__version__ = "0.1.0"
