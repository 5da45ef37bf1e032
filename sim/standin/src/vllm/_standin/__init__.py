"""The stand-in engine: argv, model loading, scheduling, HTTP server and metrics."""
