"""Jobs as a whole: their one view, listing and cancel, recovery of chunks whose worker
vanished, and the watch for a broker without workers.

Imports: data, store, config, ground.
"""
