"""Entry points: the broker consumer and the CLI commands."""
