#!/usr/bin/env bash
# Stage the native GPU compressors' public sources into the git-ignored .gpu/natives/, for
# scripts/natives.sh to build and time on the GPU machine (which has no network). Run it here
# after scripts/prepare-gpu.sh (which empties .gpu/), or as `prepare-gpu.sh --natives`.
#
#   .gpu/natives/pfpl    burtscher/PFPL          (makefile, src/)
#   .gpu/natives/fzgpu   szcompressor/FZ-GPU     (Makefile, include/, src/)
#   .gpu/natives/cuszp   szcompressor/cuSZp      (CMake files, include/, src/, examples/)
#   .gpu/natives/COMMITS one line per staged tool: name, commit, upstream URL
#
# The sources come from local git mirrors (bare or not), never from the network, and only into
# .gpu/: their code is never copied into tracked files. Only what the build needs (and the
# licence and README) is staged: no paper PDFs, sample data or .git. Mirrors, overridable:
#   NATIVES_MIRRORS  folder holding owner+name/repo mirrors (default /work/.mirror)
#   PFPL_MIRROR, FZGPU_MIRROR, CUSZP_MIRROR  one repository each (any git dir or work tree)
#   NATIVES_REV      the revision to stage from each (default HEAD)
# A missing mirror is reported and skipped; natives.sh then skips that tool.
set -euo pipefail
cd "$(dirname "$0")/.."
mirrors=${NATIVES_MIRRORS:-/work/.mirror}
rev=${NATIVES_REV:-HEAD}
dest=.gpu/natives
rm -rf "$dest"
mkdir -p "$dest"
: > "$dest/COMMITS"
staged=0

# stage NAME MIRROR URL PATH...: the listed paths of MIRROR's $rev into $dest/NAME.
stage() {
  local name=$1 mirror=$2 url=$3
  shift 3
  if [ ! -e "$mirror" ] || ! git -C "$mirror" rev-parse -q --verify "$rev^{commit}" >/dev/null 2>&1; then
    echo "note: no git mirror of $name at $mirror (set ${name^^}_MIRROR or NATIVES_MIRRORS): $name skipped, natives.sh will skip it"
    return 0
  fi
  local commit paths=()
  commit=$(git -C "$mirror" rev-parse "$rev^{commit}")
  # Only the paths this commit has (a LICENSE may be missing).
  for p in "$@"; do
    if git -C "$mirror" cat-file -e "$commit:$p" 2>/dev/null; then paths+=("$p"); fi
  done
  if [ ${#paths[@]} -eq 0 ]; then
    echo "note: $name mirror $mirror has none of: $* at $commit: $name skipped"
    return 0
  fi
  mkdir -p "$dest/$name"
  git -C "$mirror" archive --format=tar "$commit" -- "${paths[@]}" | tar -x -C "$dest/$name"
  # Belt and braces: nothing large or binary rides along.
  find "$dest/$name" -type f \( -iname '*.pdf' -o -iname '*.tar*' -o -iname '*.zip' -o -size +2M \) -print -delete |
    sed 's/^/  dropped /'
  printf '%s %s %s\n' "$name" "$commit" "$url" >> "$dest/COMMITS"
  echo "staged $name $commit ($(du -sh "$dest/$name" | cut -f1)) from $mirror"
  staged=$((staged + 1))
}

stage pfpl "${PFPL_MIRROR:-$mirrors/burtscher+PFPL/repo}" https://github.com/burtscher/PFPL \
  makefile README.md LICENSE src
stage fzgpu "${FZGPU_MIRROR:-$mirrors/szcompressor+FZ-GPU/repo}" https://github.com/szcompressor/FZ-GPU \
  Makefile README.md LICENSE include src
stage cuszp "${CUSZP_MIRROR:-$mirrors/szcompressor+cuSZp/repo}" https://github.com/szcompressor/cuSZp \
  CMakeLists.txt Config.cmake.in cmake README.md LICENSE include src examples

echo "$staged of 3 natives staged into $dest ($(du -sh "$dest" | cut -f1)); commits in $dest/COMMITS:"
cat "$dest/COMMITS"
# The device tool carries at most 64 MiB of ignored paths.
kib=$(du -sk .gpu | cut -f1)
echo ".gpu in all: $((kib / 1024)) MiB"
if [ "$kib" -gt $((62 * 1024)) ]; then
  echo "WARNING: .gpu is $((kib / 1024)) MiB, near or over the device tool's 64 MiB carry limit"
fi
