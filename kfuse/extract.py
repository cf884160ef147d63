"""Pick the candidate code out of an LLM's answer to a KernelBench prompt.

An answer is prose with several fenced code blocks: drafts, perhaps a rejected
torch-only attempt, C++ sources, and the final version last; it may be cut off
in the middle of its last block. We take the last *complete* Python block that
defines ``class ModelNew``. Fences follow CommonMark (see ``_parse_blocks``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

__all__ = ["Extraction", "ExtractionError", "extract_code"]


@dataclass(frozen=True)
class Extraction:
    """The chosen code and where it was found in the answer text."""

    code: str  # the block's content, without the fences, ending in a newline
    block: int  # 1-based index of the chosen block among all fenced blocks
    blocks: int  # how many fenced blocks the text holds (complete or not)
    first_line: int  # 1-based line numbers of the code's first and last lines
    last_line: int
    why: str  # one sentence: which block was taken and why


class ExtractionError(Exception):
    """The answer holds no code we can judge; the message is one sentence saying what was found."""


# Opening fence: up to 3 spaces, then 3+ backticks or 3+ tildes, then an info string.
_OPEN = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
_MODEL_NEW = re.compile(r"^\s*class\s+ModelNew\b", re.MULTILINE)
_PYTHON_LANGS = {"", "python", "py", "python3"}


@dataclass(frozen=True)
class _Block:
    index: int  # 1-based
    lang: str  # first word of the info string, lower-cased ("" if none)
    lines: list[str]  # content lines, fence indentation removed
    first_line: int  # 1-based line of the first content line (the line after the fence)
    closed: bool

    @property
    def last_line(self) -> int:
        return self.first_line + len(self.lines) - 1

    @property
    def defines_model_new(self) -> bool:
        return bool(_MODEL_NEW.search("\n".join(self.lines)))

    @property
    def is_python(self) -> bool:
        return self.lang in _PYTHON_LANGS

    @property
    def qualifies(self) -> bool:
        return self.closed and self.is_python and self.defines_model_new


def _split_lines(text: str) -> list[str]:
    """Lines of the text, BOM dropped; \\r\\n and \\r count as line ends (str.splitlines would
    also split on form feeds and the like, and throw the line numbers off)."""
    text = text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")
    if lines[-1] == "":  # a final newline ends the last line; it does not start a new one
        lines.pop()
    return lines


def _parse_blocks(lines: list[str]) -> list[_Block]:
    """All fenced code blocks, in order, as CommonMark reads them."""
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        m = _OPEN.match(lines[i])
        # A backtick fence's info string may not hold a backtick: "```x```" on a line is inline code.
        if not m or (m.group(2)[0] == "`" and "`" in m.group(3)):
            i += 1
            continue
        indent, fence, info = len(m.group(1)), m.group(2), m.group(3).strip()
        # The closing fence: same character, at least as many, nothing but whitespace after.
        # So a ````-fenced block can hold ``` lines, and ``` cannot close a ```` block.
        close = re.compile(r"^ {0,3}" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        end = i + 1
        while end < len(lines) and not close.match(lines[end]):
            end += 1
        # CommonMark removes up to the fence's own indentation from each content line.
        content = [_dedent(line, indent) for line in lines[i + 1 : end]]
        words = info.split()
        blocks.append(
            _Block(
                index=len(blocks) + 1,
                lang=words[0].lower() if words else "",
                lines=content,
                first_line=i + 2,
                closed=end < len(lines),  # an unclosed block runs to the end of the text
            )
        )
        i = end + 1
    return blocks


def _dedent(line: str, indent: int) -> str:
    spaces = len(line) - len(line.lstrip(" "))
    return line[min(spaces, indent) :]


def _numbers(blocks: list[_Block]) -> str:
    """'block 3' or 'blocks 2, 4'."""
    nums = ", ".join(str(b.index) for b in blocks)
    return f"block {nums}" if len(blocks) == 1 else f"blocks {nums}"


def _verb(blocks: list[_Block], one: str, many: str) -> str:
    return one if len(blocks) == 1 else many


def _notes(blocks: list[_Block]) -> list[str]:
    """Why each of these blocks was not taken, grouped into short clauses."""
    notes = []
    closed = [b for b in blocks if b.closed]
    foreign = [b for b in closed if b.defines_model_new and not b.is_python]
    if foreign:
        langs = ", ".join(sorted({b.lang for b in foreign}))
        notes.append(
            f"{_numbers(foreign)} mention{_verb(foreign, 's', '')} class ModelNew "
            f"but {_verb(foreign, 'is', 'are')} {langs}, not Python"
        )
    without = [b for b in closed if not b.defines_model_new]
    if without:
        notes.append(f"{_numbers(without)} {_verb(without, 'does', 'do')} not define class ModelNew")
    cut = [b for b in blocks if not b.closed]  # at most one: the last block, so its note goes last
    if cut:
        does = " defines class ModelNew but" if cut[0].defines_model_new else ""
        notes.append(f"{_numbers(cut)}{does} is cut off (no closing fence)")
    return notes


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def extract_code(text: str) -> Extraction:
    """The final complete fenced Python block that defines class ModelNew.

    A text with no fences at all is taken whole if it is Python that defines class ModelNew.
    The returned code uses "\\n" line ends whatever the text used.
    Raises ExtractionError, with one sentence saying what was found, when nothing qualifies.
    """
    lines = _split_lines(text)
    blocks = _parse_blocks(lines)

    if not blocks:
        return _whole_text(lines)

    chosen = next((b for b in reversed(blocks) if b.qualifies), None)
    if chosen is None:
        details = "; ".join(_notes(blocks))
        raise ExtractionError(
            f"no complete fenced Python code block defines class ModelNew: "
            f"{_plural(len(blocks), 'fenced block')} found; {details}"
        )

    # A syntax error in the chosen block is not ours to reject: the judge reports it as a compile error.
    why = (
        f"took block {chosen.index} of {len(blocks)} (lines {chosen.first_line}-{chosen.last_line}): "
        f"the last complete code block that defines class ModelNew"
    )
    later = _notes(blocks[chosen.index :])
    if later:
        why += "; " + "; ".join(later)
    return Extraction(
        code="\n".join(chosen.lines) + "\n",
        block=chosen.index,
        blocks=len(blocks),
        first_line=chosen.first_line,
        last_line=chosen.last_line,
        why=why,
    )


def _whole_text(lines: list[str]) -> Extraction:
    """No fences at all: the answer may be a plain Python file."""
    code = "\n".join(lines) + "\n"
    try:
        ast.parse(code)
    except SyntaxError as err:
        raise ExtractionError(
            f"no fenced code blocks, and the text is not Python (line {err.lineno}: {err.msg})"
        ) from None
    except ValueError:  # e.g. a NUL byte
        raise ExtractionError("no fenced code blocks, and the text is not Python") from None
    if not _MODEL_NEW.search(code):
        raise ExtractionError(
            "no fenced code blocks, and the text is Python that does not define class ModelNew"
        )
    return Extraction(
        code=code,
        block=1,
        blocks=0,
        first_line=1,
        last_line=len(lines),
        why="no fenced blocks; the whole file is Python that defines class ModelNew",
    )
