"""Games: the `Problem` interface a game implements, the registry of installed games, the
built-in games with their Grundy tables and C kernels, the reading of cases from tokens, and
the toolkit (generators, brute force, stress). A game knows nothing of Redis, chunks, grading
or judging.

Imports: config, ground.
"""
