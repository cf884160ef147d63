#!/usr/bin/env python3
"""The C++ compiler of the test run's extension builds (CXX): g++, with torch's common headers precompiled.

About half of each CPU extension's 10 s build is g++ parsing the same ATen and pybind11 headers again; a test run
builds some seventy. Here every compile of a source is given `-include kfuse_test_headers.h` (the headers emitted
files use, or torch/extension.h for a source that includes it), whose precompiled form
(a PCH, built once per distinct set of flags, under a lock, by whichever compile needs it first) g++ loads instead
of parsing. The sources and flags are the emitted files' own: the headers are included once more in front, which
their include guards make a no-op. Where the PCH does not fit the flags, g++ ignores it and parses the header.
Only the tests use this (tests/conftest.py sets CXX); emitted files are built as they are everywhere else.

One more test-only change: KFUSE_TEST_OPT (conftest sets -O1) stands for the sources' -O2/-O3 in compiles. The
tests check what the C++ computes, not how fast: -O1 compiles an emitted file in 5.1 s against -O3's 7.9 s.
`KFUSE_TEST_OPT=-O3 python3 -m pytest` builds with the files' own flags.
"""

import fcntl
import hashlib
import os
import subprocess
import sys
from pathlib import Path

# What emitted files include (kfuse/compiler/codegen.py host_headers: HOST_HEADERS and the USE_HEADERS some files
# add), or, for a source that includes torch/extension.h (hand-written candidates, load_inline's default), that
# header: everything torch offers extensions. All of USE_HEADERS, though not every file needs them: most of the
# tests' files do, and a PCH without them took a composed test file 22.7 s of CPU to build against 10.1.
FULL_HEADERS = "#include <torch/extension.h>\n"
HEADERS = """\
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>
#include <ATen/core/Tensor.h>
#include <ATen/core/grad_mode.h>
#include <ATen/ops/empty_ops.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ScalarOps.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>
#include <torch/csrc/utils/pybind.h>
"""

# Flags that name this compile's files or module; the rest must match for a PCH to be used.
WITH_VALUE = {"-o", "-MF", "-MT", "-MQ"}
SOURCES = (".cpp", ".cc", ".cxx")


def pch_flags(args: list[str]) -> list[str]:
    flags, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg in WITH_VALUE:
            skip = True
        elif arg in ("-c", "-MMD", "-MD") or arg.startswith("-DTORCH_EXTENSION_NAME=") or arg.endswith(SOURCES):
            continue
        else:
            flags.append(arg)
    return flags


def headers_for(args: list[str]) -> str:
    source = next(a for a in args if a.endswith(SOURCES))
    try:
        return FULL_HEADERS if "<torch/extension.h>" in Path(source).read_text(errors="replace") else HEADERS
    except OSError:
        return HEADERS


def precompiled_header(flags: list[str], headers: str) -> Path:
    key = hashlib.sha256("\0".join(flags + [headers]).encode()).hexdigest()[:16]
    root = Path(os.environ["KFUSE_TEST_PCH_DIR"]) / key
    root.mkdir(parents=True, exist_ok=True)
    header, pch = root / "kfuse_test_headers.h", root / "kfuse_test_headers.h.gch"
    failed = root / "failed"  # tried once (a full disk, say): every compile then parses the headers itself
    with open(root / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not pch.exists() and not failed.exists():
            header.write_text(headers)
            partial = root / "kfuse_test_headers.h.gch.part"
            done = subprocess.run(["g++", *flags, "-x", "c++-header", str(header), "-o", str(partial)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if done.returncode == 0:
                os.replace(partial, pch)
            else:
                partial.unlink(missing_ok=True)
                failed.touch()
    return header


def main(args: list[str]) -> None:
    compiles_cpp = "-c" in args and any(a.endswith(SOURCES) for a in args)
    level = os.environ.get("KFUSE_TEST_OPT")
    if compiles_cpp and level:
        args = [level if a in ("-O2", "-O3") else a for a in args]
    if compiles_cpp and os.environ.get("KFUSE_TEST_PCH_DIR"):
        args = ["-include", str(precompiled_header(pch_flags(args), headers_for(args))), *args]
    os.execvp("g++", ["g++", *args])


if __name__ == "__main__":
    main(sys.argv[1:])
