"""The processes a command runs on this machine: the embedded Redis, local Celery workers,
producer processes, the supervised `gamebatch worker`, solver programs, chunks solved beside
the workers; each tied to its parent. Imports jobs, data, store, games and the ground
modules."""
