"""``python -m llm_bot.fake_model [--host H] [--port P] [--latency S]``; stops on SIGINT/TERM."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from llm_bot.fake_model.server import run_forever


def _banner(base_url: str) -> None:
    print(f"fake model server listening on {base_url}", flush=True)


def main(argv: Sequence[str] | None = None) -> None:
    """Parse arguments and run the fake model server in the foreground."""
    parser = argparse.ArgumentParser(
        prog="python -m llm_bot.fake_model",
        description="Fake OpenAI-compatible model server (default reply: 'echo: <last user msg>').",
    )
    parser.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8089, help="port to bind; 0 picks a free one")
    parser.add_argument(
        "--latency", type=float, default=0.0, help="seconds added to every chat/responses reply"
    )
    args = parser.parse_args(argv)
    run_forever(args.host, args.port, args.latency, on_ready=_banner)


if __name__ == "__main__":
    main()
