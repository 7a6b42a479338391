"""The chaos soak (short in the default run; long with GAMEBATCH_SOAK_SECONDS)."""
