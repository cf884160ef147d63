"""Picking the final complete ModelNew block out of an LLM answer text."""

import ast
from pathlib import Path

import pytest

from kfuse.extract import Extraction, ExtractionError, extract_code

ANSWERS = Path(__file__).parent / "answers"


def answer(name: str) -> str:
    return (ANSWERS / name).read_text(encoding="utf-8")


def lines_of(text: str, first: int, last: int) -> str:
    """Lines first..last (1-based) of the text, as extract_code should return them."""
    return "\n".join(text.splitlines()[first - 1 : last]) + "\n"


# --- answer fixtures ---------------------------------------------------------


def test_multi_block_takes_the_final_python_block():
    text = answer("multi_block.md")
    found = extract_code(text)
    assert (found.block, found.blocks) == (4, 4)
    assert (found.first_line, found.last_line) == (65, 107)
    assert found.code == lines_of(text, 65, 107)
    assert "load_inline" in found.code and "class ModelNew" in found.code
    assert "```" not in found.code
    ast.parse(found.code)
    assert found.why == (
        "took block 4 of 4 (lines 65-107): the last complete code block that defines class ModelNew"
    )


def test_truncated_takes_the_last_complete_block_and_says_why():
    text = answer("truncated.md")
    found = extract_code(text)
    assert (found.block, found.blocks) == (2, 3)
    assert (found.first_line, found.last_line) == (19, 53)
    assert found.code == lines_of(text, 19, 53)
    assert "ext.leaky_relu" in found.code and "float4" not in found.code
    assert "block 3" in found.why and "cut off" in found.why
    assert found.why.startswith("took block 2 of 3 (lines 19-53):")


def test_no_model_new_is_an_error():
    with pytest.raises(ExtractionError) as err:
        extract_code(answer("no_model_new.txt"))
    msg = str(err.value)
    assert "2 fenced blocks" in msg and "do not define class ModelNew" in msg


def test_only_truncated_is_an_error_that_says_cut_off():
    with pytest.raises(ExtractionError) as err:
        extract_code(answer("only_truncated.txt"))
    msg = str(err.value)
    assert "1 fenced block found" in msg
    assert "block 1 defines class ModelNew but is cut off" in msg


def test_bare_python_file_is_taken_whole():
    text = answer("bare_python.txt")
    found = extract_code(text)
    assert found == Extraction(
        code=text,
        block=1,
        blocks=0,
        first_line=1,
        last_line=len(text.splitlines()),
        why="no fenced blocks; the whole file is Python that defines class ModelNew",
    )


# --- fences ------------------------------------------------------------------

MODEL = "class ModelNew(nn.Module):\n    pass\n"


def test_four_backtick_fence_holds_a_three_backtick_line():
    text = "Intro\n````python\ndoc = '''\n```\n'''\n" + MODEL + "````\nbye\n"
    found = extract_code(text)
    assert found.blocks == 1
    assert found.code == "doc = '''\n```\n'''\n" + MODEL
    assert (found.first_line, found.last_line) == (3, 7)


def test_closing_fence_with_fewer_backticks_does_not_close():
    # The ``` line is content; the ```` block never closes, so it is cut off.
    text = "````python\n" + MODEL + "```\nmore prose\n"
    with pytest.raises(ExtractionError, match="cut off"):
        extract_code(text)


def test_closing_fence_may_be_longer_and_end_in_spaces():
    text = "```python\n" + MODEL + "`````   \nafter\n"
    assert extract_code(text).code == MODEL


def test_closing_fence_with_text_after_it_does_not_close():
    text = "```python\n" + MODEL + "``` not a fence\n"
    with pytest.raises(ExtractionError, match="cut off"):
        extract_code(text)


def test_tilde_fences():
    text = "~~~python\nx = '```'\n" + MODEL + "~~~\n"
    found = extract_code(text)
    assert found.code == "x = '```'\n" + MODEL
    assert (found.block, found.blocks) == (1, 1)


def test_backticks_do_not_close_a_tilde_fence():
    text = "~~~\n" + MODEL + "```\n"
    with pytest.raises(ExtractionError, match="cut off"):
        extract_code(text)


def test_inline_triple_backticks_are_not_a_fence():
    # "```x```" on its own line is inline code (a backtick info string cannot hold a backtick).
    text = "Use ```python``` blocks.\n```python\n" + MODEL + "```\n"
    found = extract_code(text)
    assert (found.block, found.blocks, found.first_line) == (1, 1, 3)


def test_indented_fence_strips_its_indentation_from_the_content():
    text = "  ```python\n  class ModelNew:\n      pass\n  ```\n"
    assert extract_code(text).code == "class ModelNew:\n    pass\n"


def test_four_space_indent_is_not_a_fence():
    text = "    ```python\n" + MODEL + "    ```\n"
    with pytest.raises(ExtractionError, match="no fenced code blocks"):
        extract_code(text)


# --- which block qualifies -------------------------------------------------------


def test_cpp_block_mentioning_class_model_new_is_skipped():
    text = "```python\n" + MODEL + "```\n\n```cpp\nclass ModelNew {\n};\n```\n"
    found = extract_code(text)
    assert (found.block, found.blocks) == (1, 2)
    assert "block 2 mentions class ModelNew but is cpp, not Python" in found.why


@pytest.mark.parametrize("info", ["", "python", "py", "python3", "Python", "PY", "python title=x"])
def test_python_info_strings_qualify(info):
    assert extract_code(f"```{info}\n" + MODEL + "```\n").block == 1


def test_only_foreign_blocks_is_an_error():
    with pytest.raises(ExtractionError, match="block 1 mentions class ModelNew but is cuda, not Python"):
        extract_code("```cuda\nclass ModelNew {};\n```\n")


def test_class_model_new_must_start_a_line():
    text = "```python\n# we will write class ModelNew later\nclass ModelNewer: pass\n```\n"
    with pytest.raises(ExtractionError, match="do not define class ModelNew|does not define class ModelNew"):
        extract_code(text)


def test_syntax_error_in_the_chosen_block_is_still_taken():
    text = "```python\nclass ModelNew(nn.Module:\n    pass\n```\n"
    assert extract_code(text).code == "class ModelNew(nn.Module:\n    pass\n"


def test_later_blocks_without_model_new_are_named_in_why():
    text = "```python\n" + MODEL + "```\n```bash\npython run.py\n```\n```\npip install x\n```\n"
    found = extract_code(text)
    assert (found.block, found.blocks) == (1, 3)
    assert found.why.endswith("; blocks 2, 3 do not define class ModelNew")


# --- line ends and numbering ---------------------------------------------------------


def test_crlf_and_bom():
    text = "\ufeffProse\r\n\r\n```python\r\nimport torch\r\n" + MODEL.replace("\n", "\r\n") + "```\r\n"
    found = extract_code(text)
    assert found.code == "import torch\n" + MODEL
    assert (found.first_line, found.last_line) == (4, 6)
    assert "\r" not in found.code


def test_bare_python_with_crlf_and_bom():
    text = "\ufeffimport torch.nn as nn\r\n\r\n" + MODEL.replace("\n", "\r\n")
    found = extract_code(text)
    assert found.code == "import torch.nn as nn\n\n" + MODEL
    assert (found.blocks, found.first_line, found.last_line) == (0, 1, 4)


def test_line_numbers_point_at_the_code():
    text = "a\nb\n```python\nimport torch\n\n" + MODEL + "```\nc\n```py\nclass ModelNew: ...\n```"
    found = extract_code(text)  # no final newline after the last fence
    assert (found.block, found.first_line, found.last_line) == (2, 11, 11)
    assert found.code == "class ModelNew: ...\n"
    first = extract_code(text.rsplit("```py", 1)[0])
    assert (first.first_line, first.last_line) == (4, 7)
    assert lines_of(text, 4, 7) == first.code


def test_form_feed_does_not_shift_line_numbers():
    text = "prose\x0cmore\n```python\n" + MODEL + "```\n"
    assert extract_code(text).first_line == 3


# --- no fences ---------------------------------------------------------------------


def test_prose_without_fences_is_an_error():
    with pytest.raises(ExtractionError, match="not Python"):
        extract_code("I cannot write class ModelNew for this problem, sorry.\n")


def test_python_without_model_new_is_an_error():
    with pytest.raises(ExtractionError, match="does not define class ModelNew"):
        extract_code("import torch\n\nclass Model:\n    pass\n")


def test_empty_text_is_an_error():
    with pytest.raises(ExtractionError):
        extract_code("")
