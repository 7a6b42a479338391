"""The application layer: one module per workflow (solve, collect, the jobs' submit, status
and cancel, grade, judge, hack, verify), each taking a request value and returning a result
value, and the one place that workflow's steps are written; the cluster handle they run on,
one verdict job's life, and the backend interface the fronts call. The CLI, the server and
client mode only adapt it.

Imports: local, workers, packages, judging, hacking, grading, jobs, data, store, games,
config, ground.
"""
