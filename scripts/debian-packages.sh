#!/usr/bin/env bash
# Installs, in one apt-get, the Debian packages named on the command line
# whose tools are absent, and the ones the build itself needs (always): llama.cpp
# (the local model's engine, built from source by the `llama-cpp-sys-2`
# crate) needs cmake and a C++ compiler, and its bindings are generated with
# libclang. Packages: cmake, g++, libclang-dev, and any of chromium,
# faketime, postgresql asked for. Nothing is installed when all is there.
#
# Without apt-get (not Debian or Ubuntu), or without root or sudo, it says
# what to install and fails. Used by scripts/serve and scripts/test.
set -euo pipefail

# Whether a package's tools are on this machine.
present() {
  case "$1" in
    cmake) command -v cmake >/dev/null ;;
    g++) command -v c++ >/dev/null || command -v g++ >/dev/null ;;
    # Where clang-sys (bindgen) looks: LIBCLANG_PATH, then LLVM's directories.
    # libclang.so or libclang-N.so, not libclang-cpp.so (another library,
    # which some machines have without libclang, and clang-sys skips).
    libclang-dev)
      [ -n "${LIBCLANG_PATH:-}" ] ||
        compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null ||
        compgen -G '/usr/lib/llvm-*/lib/libclang-[0-9]*.so*' >/dev/null ||
        compgen -G '/usr/lib/*/libclang.so*' >/dev/null ||
        compgen -G '/usr/lib/*/libclang-[0-9]*.so*' >/dev/null ;;
    chromium) command -v chromium >/dev/null ;;
    faketime) command -v faketime >/dev/null ;;
    postgresql) compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null ;;
    *) echo "debian-packages.sh: unknown package $1" >&2; return 2 ;;
  esac
}

missing=()
for package in cmake g++ libclang-dev "$@"; do
  present "$package" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] && exit 0

sudo=""
[ "$(id -u)" -eq 0 ] || { command -v sudo >/dev/null && sudo="sudo"; }
if ! command -v apt-get >/dev/null || { [ "$(id -u)" -ne 0 ] && [ -z "$sudo" ]; }; then
  cat >&2 <<MSG
debian-packages.sh: missing ${missing[*]}, and this script can only install
them with apt-get as root or with sudo. Install them with your system's
package manager (macOS: brew install cmake llvm; Fedora: dnf install cmake
gcc-c++ clang-devel), or set LIBCLANG_PATH to the directory of libclang.
MSG
  exit 1
fi
echo "debian-packages.sh: installing ${missing[*]}" >&2
# The package lists are read once: not again when they are under an hour
# old (scripts/test installs in two steps, build tools first).
if ! find /var/lib/apt/lists -maxdepth 1 -name '*_Packages*' -mmin -60 2>/dev/null | grep -q .; then
  $sudo apt-get update -qq >&2
fi
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
