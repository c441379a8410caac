"""The wire's id rule: every id (event, tenant, user, conversation) matches
:data:`ID_PATTERN`, safe to embed in Redis keys and log lines."""

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$"

ID_MAX_LENGTH = 128
"""Of every id (``ID_PATTERN``)."""
