"""The batch summariser example (see README.md)."""
