"""Service layer: turns a delivery into a command, runs it, and names the outcome."""
