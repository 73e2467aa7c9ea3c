"""Subscription routing: the per-account subject trie with a match cache, and fan-out."""
