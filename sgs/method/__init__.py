"""The method: the roles' prompts and output parsing, the rewards and the training objectives.

Pure functions and data, no Ray, no processes: what a researcher changes to change
the algorithm, each piece unit-tested on hand-computed cases.
"""
