"""Regular expressions that find whole words of C text (the names the C host's passes write and look
for), written so that Python's `re` scans for their first letters rather than trying them at every
position: a pattern that starts with `\\b` or a look-behind gets no such scan, and on a host C of
tens of kilobytes each of those scans costs some 0.4 ms, a dozen of them per build.
"""
from __future__ import annotations

import re
from typing import Iterator


def word(prefix: str, rest: str, flags: int = 0) -> re.Pattern[str]:
    """`\\b<prefix><rest>` for a literal `prefix` that starts with a word character: the same matches,
    found by the literal first (the look-behind after it checks the character before the word)."""
    literal = re.escape(prefix)
    return re.compile(rf"{literal}(?<!\w{literal}){rest}", flags)


def words(pattern: re.Pattern[str], text: str) -> Iterator[re.Match[str]]:
    """The matches of `pattern` (without a leading `\\b`: a word's first letters) that start a word."""
    for found in pattern.finditer(text):
        start = found.start()
        if start == 0 or not (text[start - 1].isalnum() or text[start - 1] == "_"):
            yield found
