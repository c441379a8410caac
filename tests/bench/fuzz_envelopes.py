"""The property and header fuzz of ``make test``, run long: any bytes in every short-string
property, header name and header value, and any timestamp, through pamqp's frame
encoder/decoder with llm-bot's total decoders installed; and the malformed-body fuzz.

    .venv/bin/python -m tests.bench.fuzz_envelopes --examples 20000

``make test`` runs 300 examples of each; this runs ``--examples`` of each (no services
needed) and prints how long each took, or the first falsifying example, exit code 1.
"""

from __future__ import annotations

import argparse
import importlib
import os
import time

TESTS = (
    ("tests.unit.test_amqp_text", "test_any_content_header_decodes_and_encodes_back_to_its_bytes"),
    ("tests.unit.test_amqp_text", "test_valid_text_decodes_as_pamqp_decodes_it"),
    ("tests.integration.test_malformed_bodies", "test_parse_event_rejects_malformed_bodies_with_a_clear_error"),
)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--examples", type=int, default=20000)
    examples = parser.parse_args().examples
    os.environ["LLMBOT_FUZZ_EXAMPLES"] = str(examples)  # the tests' @settings read it
    failed = 0
    for module_name, name in TESTS:
        test = getattr(importlib.import_module(module_name), name)
        started = time.perf_counter()
        try:
            test()
        except Exception as exc:  # noqa: BLE001  # report any failure, go on to the next
            failed += 1
            print(f"{name}: FAIL after {time.perf_counter() - started:.1f}s: {exc!r}")
            continue
        print(f"{name}: {examples} examples passed in {time.perf_counter() - started:.1f}s")
    raise SystemExit(1 if failed else 0)


if __name__ == "__main__":
    main()
