"""The processes a command runs on this machine: the embedded Redis, local Celery workers,
producer processes, the supervised `gamebatch worker`; each tied to its parent."""
