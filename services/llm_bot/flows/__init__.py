"""Durable structured dialogues (SPEC 5.10): flows declared as data, their answers read deterministically first."""
