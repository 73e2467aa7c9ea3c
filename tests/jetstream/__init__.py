"""JetStream tests."""
