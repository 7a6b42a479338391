"""The processes a command runs on this machine: the embedded Redis, local Celery workers,
producer processes, the supervised `gamebatch worker`, solver programs, chunks solved beside
the workers, and the warm service that keeps them for the next command; each tied to its
parent.

Imports: workers, data, store, games, config, ground.
"""
