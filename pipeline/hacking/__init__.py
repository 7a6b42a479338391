"""Hacking's pure part: the search's rounds of generated cases (every shape, growing size),
shrinking candidates, what a search is given and finds, and its report. The search itself,
on the cluster, is the application layer's (`pipeline.app.hack`).

Imports: grading, data, games, ground.
"""
