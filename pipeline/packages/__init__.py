"""Problem packages (the Kattis / ICPC format): a package read from its folder (problem.yaml,
tests and their groups, validators, submissions and their promises), the default output
validator, what `verify` concludes from the runs, and a game written as a package. The runs
themselves are the workers' (`workers/packages.py`); the workflow is the application
layer's (`pipeline.app.verify`).

Imports: judging, games, config, ground.
"""
