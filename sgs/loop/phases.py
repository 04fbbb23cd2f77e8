"""The phases of an iteration, by name, in order.

A module of their own, importing nothing, so that the command line
(:mod:`sgs.__main__`) can tell where a run directory stands (resume, or
all done, or another version's phases) before it loads torch and Ray.
"""

#: The phase that trains the roles' weights (a role's checkpoint counts once it is done).
TRAINING_PHASE = "train"
#: Every phase, in the order an iteration runs them.
PHASES = ("conjecture", "prove", "review", TRAINING_PHASE, "record")
#: The phases that write records (the others only commit a marker).
RECORD_PHASES = frozenset({"conjecture", "prove", "review"})
