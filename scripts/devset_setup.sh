#!/usr/bin/env bash
# The git-ignored .devset folder that device calls carry: the development set's problems and KernelBench's harness
# copied from ../shared/kernelbench, the wheels KernelBench's harness needs on the device (pydantic, requests; the
# device has Python 3.12 and no network) and, given a commit, a worktree of it for A/Bs (scripts/gpu_ab_against.sh),
# plus one per further branch, at .devset/<the branch's last path part> (gpu_ab_against.sh's --also LABEL=DIR).
# Run it before the session's first device call: a folder added to .devset after it did not reach the machine.
#
#   scripts/devset_setup.sh [BASE_COMMIT [BRANCH ...]]
set -euo pipefail
cd "$(dirname "$0")/.."
shared=${KB_SHARED:-../shared/kernelbench}
mkdir -p .devset
for part in level1 level2 level3 harness; do
    rm -rf ".devset/$part" && cp -r "$shared/$part" .devset/
done
pip download -q --only-binary=:all: --python-version 3.12 --platform manylinux2014_x86_64 -d .devset/wheels \
    pydantic requests 2>&1 | grep -v WARNING || true
worktree() {  # worktree DIR COMMIT: kfuse and scripts only (the carry's 64 MiB)
    git worktree remove --force "$1" 2>/dev/null || true
    git worktree add --detach "$1" "$2" >/dev/null
    rm -rf "$1/results" "$1/tests"
}
if [ $# -ge 1 ]; then
    worktree .devset/base "$1"
    shift
    for branch in "$@"; do worktree ".devset/${branch##*/}" "$branch"; done
fi
du -sh .devset
