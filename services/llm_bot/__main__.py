"""``python -m llm_bot``: the same as the ``llm-bot`` command."""

import sys

from llm_bot.cli import main

sys.exit(main())
