"""The HTTP service (`gamebatch serve`): uploads, results, events and webhooks over `/v1`."""
