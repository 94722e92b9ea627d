#!/usr/bin/env bash
# Installs the Debian 12 packages libtensor's build, tests and tools need, the digits and Fashion-MNIST
# data sets (idempotent, non-interactive, run as root).
#
# Only packages that are missing are installed, and `apt-get update` runs only
# when something is missing, so a second run does nothing and needs no network.
set -euo pipefail

PACKAGES=(
  meson ninja-build g++ pkg-config      # build
  libhwy-dev libblis-openmp-dev         # CPU backend: Highway SIMD, BLIS gemm (+ OpenMP via libgomp)
  libdnnl-dev                           # f32 gemm via oneDNN's sgemm (Apache-2.0): ~6-10x BLIS 0.9 on Zen 5,
                                        # which BLIS does not recognise (backends/cpu/gemm.cpp)
  liblapack-dev                         # det / lu / qr on the CPU (reference LAPACK; BSD licence)
  libfmt-dev zlib1g-dev                 # formatting inside the library; gzip reading for tensorctl demo
  libgtest-dev                          # tests
  nlohmann-json3-dev                    # JSON headers of .safetensors files (header-only, inside lib/src)
  libvulkan-dev glslc                   # Vulkan backend: loader + headers, GLSL -> SPIR-V compiler
  mesa-vulkan-drivers                   # lavapipe: software Vulkan, so the vulkan suite runs without a GPU
  vulkan-validationlayers vulkan-tools  # validation layer in CI, vulkaninfo for diagnosis
  python3                               # build-time helpers
  libopenmpi-dev openmpi-bin            # tensor::dist over Open MPI (the `mpi` feature) and mpirun for its tests
  clang-14 libclang-rt-14-dev           # scripts/fuzz.sh: libFuzzer + ASan/UBSan runtimes for clang
  doxygen                               # the API reference (`meson compile -C build docs`, built by CI)
)

installed() {
  # dpkg prints "install ok installed" for a fully installed package; anything else
  # (absent, half-configured, removed with config left) counts as missing.
  [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" == "install ok installed" ]]
}

if [[ "$(id -u)" -ne 0 ]]; then
  echo "bootstrap: must run as root (apt-get install); try: sudo bash $0" >&2
  exit 1
fi
if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
  echo "bootstrap: needs a Debian-based system (dpkg-query and apt-get)" >&2
  exit 1
fi

missing=()
for p in "${PACKAGES[@]}"; do
  installed "$p" || missing+=("$p")
done

# Data the tests and `tensorctl demo` read: the digits CSV from Debian's python3-sklearn and
# Fashion-MNIST from dataset-fashion-mnist, extracted into .cache/ without installing them (idempotent).
fetch_data() {
  local here
  here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
  if [[ -f "$here/fetch-digits.sh" ]]; then
    bash "$here/fetch-digits.sh"
  fi
  # Fashion-MNIST (Debian's dataset-fashion-mnist, a 31 MB .deb), the same way.
  if [[ -f "$here/fetch-fashion-mnist.sh" ]]; then
    bash "$here/fetch-fashion-mnist.sh"
  fi
}

if [[ ${#missing[@]} -eq 0 ]]; then
  echo "bootstrap: all ${#PACKAGES[@]} packages already installed"
  fetch_data
  exit 0
fi

echo "bootstrap: missing ${#missing[@]} of ${#PACKAGES[@]} packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
echo "bootstrap: apt-get update"
apt-get update -q
echo "bootstrap: apt-get install ${missing[*]}"
apt-get install -y -q --no-install-recommends "${missing[@]}"

still=()
for p in "${missing[@]}"; do
  installed "$p" || still+=("$p")
done
if [[ ${#still[@]} -ne 0 ]]; then
  echo "bootstrap: still missing after install: ${still[*]}" >&2
  exit 1
fi
echo "bootstrap: installed ${missing[*]}"
fetch_data
