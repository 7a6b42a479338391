"""Client mode (`--server URL`): the workflows run by `gamebatch serve` over HTTP, behind the
backend interface of the application layer; never Redis.

Imports: app, hacking, packages, grading, jobs, data, store, config, ground.
"""
