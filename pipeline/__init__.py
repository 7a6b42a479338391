"""gamebatch pipeline: producer, collector, job state and the command line."""
