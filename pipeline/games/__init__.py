"""The built-in games, each a `pipeline.problem.Problem` registered as an entry point."""
