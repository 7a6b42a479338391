"""The HTTP service (`gamebatch serve`): uploads, results, events and webhooks over `/v1`, the
gradings' routes and the page. Imports the services below it (solving and grading), jobs,
store and the ground modules; the command line is above it."""
