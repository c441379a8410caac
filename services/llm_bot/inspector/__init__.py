"""``llm-bot inspect``: the memory inspector in the browser (SPEC 7.3).

Server-rendered pages, each with its JSON twin from the same view function; built from the
same ports and adapters as the service; every read asks the key's scope first.
"""
