"""Stream storage: the StreamStore interface and its memory and file implementations."""
