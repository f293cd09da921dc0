# Sourced by the manylinux scripts and tests: downloads wheels for CPython
# X.Y on manylinux x86-64 with this host's pip (the roots get no pip
# settings of their own), its warnings about this host's extra package
# folders filtered out.
#
#   manylinux_download X.Y DEST REQUIREMENT... [PIP_OPTIONS]
manylinux_download() {
  local version=$1 dest=$2
  shift 2
  "${PYTHON:-.venv/bin/python}" -m pip download -q --only-binary=:all: --platform manylinux_2_31_x86_64 \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --python-version "$version" --implementation cp --abi "cp${version/./}" -d "$dest" "$@" \
    2> >(grep -v "is ignored" >&2)
}
