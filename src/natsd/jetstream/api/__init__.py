"""The JetStream API: the $JS.API route table and handlers, direct get."""
