"""Data: an input's bytes on their way through the cluster. Output files, objects by URL and
the payload store, chunk messages on the wire, chunking and the C slices, the producer that
queues chunks (and the one loop every producer shares) and the collector that writes answers
back in input order.

Imports: store, games, config, ground.
"""
