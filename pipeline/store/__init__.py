"""Job state: the `Store` protocol and its two homes (Redis with its Lua scripts, this
process's memory), the key schema, shards, connections (Sentinel-following ones too) and the
server's job records. Knows nothing of how bytes are read, chunked or judged.

Imports: games, config, ground.
"""
