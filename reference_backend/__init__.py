"""reference_backend."""
