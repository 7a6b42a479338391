"""The HTTP server (`gamebatch serve`): uploads, results, events and webhooks over `/v1`, the
gradings' and hack searches' routes and the page; its runners run the application layer's
workflows. The command line is above it.

Imports: app, hacking, packages, grading, jobs, data, store, games, config, ground.
"""
