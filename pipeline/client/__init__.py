"""Client mode (`--server URL`): the commands over HTTP against `gamebatch serve`, with the
output and exit codes they have on a cluster. Imports grading (reports), jobs, data and the
ground modules; never Redis."""
