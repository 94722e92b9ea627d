#!/bin/sh
# Vulkan check on a real GPU machine (NVIDIA, no network, maybe no Vulkan loader,
# maybe no compiler, meson or ninja): runs the Vulkan op tests and the Vulkan
# benchmark against the GPU and prints one table. Budget: under 8 minutes.
#
#   tools/vulkan_device_check.sh prepare [BUILD_DIR]    on the development machine
#   tools/vulkan_device_check.sh run                    on the GPU machine
#
# `prepare` (needs a finished build, default build-vk) packs into
# build-vkcheck/vkcheck.tar.gz (ignored by git, so it travels as a carried path;
# `run` unpacks it under $TMPDIR): the stripped test binaries
# (the device-generic op and edge-case suites, the Vulkan op tests, scatter rules,
# the f16 / cooperative-matrix tests, subgroup reductions, fused kernels, memory
# limit and recovery) and the bench
# binary, libtensor.so, the shared libraries they need that a bare machine may
# lack (hwy, fmt, blis, gomp, stdc++ ...; glibc is assumed), and the Vulkan loader
# libvulkan.so.1. Keep it under the 64 MiB carry limit (it prints the size).
#
# `run` uses, in order:
#   * binaries: build-vkcheck/ if present, else it builds with meson/ninja/glslc
#     into build-vkcheck-src/ when those tools exist, else it stops with a message;
#   * loader: $TENSOR_VK_LOADER_DIR (unpacked libvulkan1 .deb: the first
#     libvulkan.so.1 found under it), else build-vkcheck/lib/libvulkan.so.1, else
#     the system's (the backend dlopens it: TENSOR_VK_LOADER names the file);
#   * driver: $VK_DRIVER_FILES if set, else the first NVIDIA ICD json of
#     /usr/local/nvidia/share/vulkan/icd.d, /usr/share/vulkan/icd.d,
#     /etc/vulkan/icd.d (exported as VK_DRIVER_FILES and VK_ICD_FILENAMES).
# The validation layer is used only when TENSOR_VK_VALIDATION=1 is set by the
# caller (GPU machines usually lack it, and then every test would count that).
# TENSOR_VKCHECK_FILTER (a gtest filter) narrows the op tests, e.g. for a dry run
# on lavapipe, where the whole suite takes longer than this script's budget.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
pack="$here/build-vkcheck"
tests="tests/vulkan/vulkan_ops_test tests/vulkan/vulkan_scatter_test tests/vulkan/vulkan_coopmat_test tests/vulkan/vulkan_reduce_test
  tests/vulkan/vulkan_fused_test tests/vulkan/vulkan_memory_test tests/vulkan/vulkan_graph_test tests/ops_test tests/edge_cases_test"

prepare() {
  build=${1:-"$here/build-vk"}
  case $build in /*) ;; *) build="$here/$build" ;; esac
  for f in $tests tests/vulkan/vk_bench libtensor.so; do
    [ -e "$build/$f" ] || { echo "prepare: $build/$f missing (build first: ninja -C $build)"; exit 1; }
  done
  rm -rf "$pack" && mkdir -p "$pack/lib" "$pack/bin"
  for f in $tests tests/vulkan/vk_bench; do cp "$build/$f" "$pack/bin/"; done
  cp -L "$build/libtensor.so" "$pack/lib/libtensor.so.0"
  # Non-glibc libraries the binaries resolve to here.
  for b in "$pack"/bin/* "$pack/lib/libtensor.so.0"; do
    ldd "$b" | awk '/=> \// {print $3}'
  done | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libtensor.so*) ;;
      *) cp -L "$lib" "$pack/lib/" ;;
    esac
  done
  loader=$(ldconfig -p 2>/dev/null | awk '/libvulkan.so.1 .*x86-64/ {print $NF; exit}')
  [ -n "$loader" ] && cp -L "$loader" "$pack/lib/libvulkan.so.1"
  strip --strip-unneeded "$pack"/bin/* "$pack"/lib/* 2>/dev/null
  # One gzip'd tar (about a third of the size): the carry limit is 64 MiB.
  tar -C "$pack" -czf "$here/vkcheck.tar.gz" bin lib && rm -rf "$pack" && mkdir -p "$pack" &&
    mv "$here/vkcheck.tar.gz" "$pack/" || { echo "prepare: packing failed"; exit 1; }
  echo "prepared $pack ($(du -sh "$pack" | cut -f1)); carry it: build-vkcheck"
}

find_icd() {
  for d in /usr/local/nvidia/share/vulkan/icd.d /usr/share/vulkan/icd.d /etc/vulkan/icd.d; do
    for f in "$d"/nvidia_icd*.json; do
      [ -f "$f" ] && { echo "$f"; return; }
    done
  done
}

run() {
  start=$(date +%s)
  if [ -f "$pack/vkcheck.tar.gz" ]; then
    unpacked="${TMPDIR:-/tmp}/libtensor-vkcheck-pack"
    rm -rf "$unpacked" && mkdir -p "$unpacked" && tar -C "$unpacked" -xzf "$pack/vkcheck.tar.gz" ||
      { echo "cannot unpack $pack/vkcheck.tar.gz"; exit 1; }
    pack="$unpacked"
  fi
  bin="$pack/bin"
  if [ ! -x "$bin/vulkan_ops_test" ]; then
    if command -v meson >/dev/null && command -v ninja >/dev/null && command -v glslc >/dev/null; then
      echo "no build-vkcheck/: building with meson (a few minutes)"
      meson setup "$here/build-vkcheck-src" "$here" --wrap-mode=nodownload -Dbuildtype=release >/dev/null &&
        ninja -C "$here/build-vkcheck-src" $tests tests/vulkan/vk_bench >/dev/null ||
        { echo "build failed"; exit 1; }
      bin="$here/build-vkcheck-src/bin"
      mkdir -p "$bin"
      for f in $tests tests/vulkan/vk_bench; do ln -sf "$here/build-vkcheck-src/$f" "$bin/"; done
    else
      echo "no build-vkcheck/ and no meson/ninja/glslc here: run 'tools/vulkan_device_check.sh prepare' on the"
      echo "development machine and carry build-vkcheck with the tree"
      exit 2
    fi
  fi
  export LD_LIBRARY_PATH="$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  loader=system
  if [ -n "${TENSOR_VK_LOADER_DIR:-}" ]; then
    f=$(find "$TENSOR_VK_LOADER_DIR" -name 'libvulkan.so.1*' \( -type f -o -type l \) 2>/dev/null | sort | head -n 1)
    [ -n "$f" ] && { export TENSOR_VK_LOADER="$f"; loader="$f"; }
  elif [ -e "$pack/lib/libvulkan.so.1" ]; then
    export TENSOR_VK_LOADER="$pack/lib/libvulkan.so.1"
    loader="$TENSOR_VK_LOADER (carried)"
  fi
  if [ -z "${VK_DRIVER_FILES:-}" ]; then
    icd=$(find_icd)
    [ -n "$icd" ] && export VK_DRIVER_FILES="$icd" VK_ICD_FILENAMES="$icd"
  fi
  export XDG_CACHE_HOME="${TMPDIR:-/tmp}/libtensor-vkcheck-cache"
  out="${TMPDIR:-/tmp}/vkcheck.$$"
  mkdir -p "$out"

  # The op tests (the device-generic suites on vulkan, then the Vulkan-specific ones)
  # into one log. The time limits add up to under 8 minutes with everything below.
  trc=0
  : >"$out/tests.txt"
  for t in "vulkan_ops_test 60" "ops_test 90" "edge_cases_test 30"; do
    set -- $t
    TENSOR_TEST_DEVICE=vulkan timeout "$2" "$bin/$1" --gtest_brief=1 --gtest_filter="${TENSOR_VKCHECK_FILTER:-*}" \
      >>"$out/tests.txt" 2>&1 || trc=$?
  done
  # Scatter rules, and the f16 paths: coopmat gate, self-test and coopmat vs tiled vs
  # cpu (the matmul case), native f16 kernels; then again with both switched off.
  timeout 30 "$bin/vulkan_scatter_test" --gtest_brief=1 >"$out/scatter.txt" 2>&1
  src=$?
  timeout 30 "$bin/vulkan_coopmat_test" --gtest_brief=1 >"$out/coopmat.txt" 2>&1
  crc=$?
  TENSOR_VK_DISABLE_COOPMAT=1 TENSOR_VK_DISABLE_F16ARITH=1 timeout 30 "$bin/vulkan_coopmat_test" --gtest_brief=1 \
    >"$out/coopmat_off.txt" 2>&1
  corc=$?
  # Reductions at the device's own subgroup size (lavapipe only has 8), then on the
  # shared-memory trees; the fused elementwise kernels; the memory limit and recovery.
  timeout 30 "$bin/vulkan_reduce_test" --gtest_brief=1 >"$out/reduce.txt" 2>&1
  rrc=$?
  TENSOR_VK_DISABLE_SUBGROUP=1 timeout 20 "$bin/vulkan_reduce_test" --gtest_brief=1 >"$out/reduce_nosg.txt" 2>&1
  rnrc=$?
  timeout 30 "$bin/vulkan_fused_test" --gtest_brief=1 >"$out/fused.txt" 2>&1
  frc=$?
  TENSOR_VK_MEMORY_LIMIT=16M timeout 15 "$bin/vulkan_memory_test" --gtest_brief=1 --gtest_filter='VulkanMemoryLimit*' \
    >"$out/memory.txt" 2>&1
  mrc=$?
  # Graph replay (4 s on lavapipe): one command buffer, the fused elementwise runs (their GPU bound,
  # Context::kFuseMaxHardware, is a guess until timed: `tensorctl bench --graph --device vulkan`).
  timeout 10 "$bin/vulkan_graph_test" --gtest_brief=1 >"$out/graph.txt" 2>&1
  grc=$?
  timeout 75 "$bin/vk_bench" >"$out/bench.txt" 2>&1
  brc=$?
  # Start-up (first op) with an empty cache dir, then filled, then without our
  # pipeline cache; the driver's own shader cache is off for all three
  # (__GL_SHADER_DISK_CACHE=0 for NVIDIA, MESA_SHADER_CACHE_DISABLE for Mesa).
  sdir="$out/startup-cache"
  rm -rf "$sdir"
  for mode in empty filled off; do
    pc=1; [ $mode = off ] && pc=0
    printf '%-7s ' "$mode" >>"$out/startup.txt"
    XDG_CACHE_HOME="$sdir" TENSOR_VK_PIPELINE_CACHE=$pc __GL_SHADER_DISK_CACHE=0 MESA_SHADER_CACHE_DISABLE=true \
      timeout 12 "$bin/vk_bench" --startup >>"$out/startup.txt" 2>&1
  done

  failed=$(grep -E '^\[  FAILED  \] [A-Za-z/]+\.' "$out/tests.txt" | sort -u | wc -l)
  summary=$(grep -E '^\[  PASSED  \]|tests? ran' "$out/tests.txt" | tr '\n' ' ')
  echo
  echo "==================== libtensor Vulkan device check ===================="
  printf '%-14s %s\n' "device" "$(grep -m1 '^device:' "$out/bench.txt" | cut -c9-)"
  printf '%-14s %s\n' "loader" "$loader"
  printf '%-14s %s\n' "driver json" "${VK_DRIVER_FILES:-(loader default)}"
  printf '%-14s %s\n' "validation" "${TENSOR_VK_VALIDATION:-off}"
  printf '%-14s rc=%s  %s\n' "op tests" "$trc" "$summary"
  [ "$failed" -gt 0 ] && grep -E '^\[  FAILED  \] [A-Za-z/]+\.' "$out/tests.txt" | sort -u | sed 's/^/               /'
  [ "$trc" -ne 0 ] && [ "$failed" -eq 0 ] && tail -n 5 "$out/tests.txt" | sed 's/^/               /'
  for t in scatter:$src coopmat:$crc coopmat_off:$corc reduce:$rrc reduce_nosg:$rnrc fused:$frc memory:$mrc graph:$grc; do
    n=${t%%:*}
    printf '%-14s rc=%s  %s\n' "$n" "${t#*:}" "$(grep -E '^\[  PASSED  \]|tests? ran' "$out/$n.txt" | tr '\n' ' ')"
    grep -E '^\[  FAILED  \] [A-Za-z]+\.' "$out/$n.txt" | sort -u | sed 's/^/               /'
  done
  printf '%-14s rc=%s\n' "benchmark" "$brc"
  grep -v '^device:' "$out/bench.txt" | sed 's/^/  /'
  echo "pipeline cache (cache dir empty / filled by the run before / TENSOR_VK_PIPELINE_CACHE=0):"
  sed 's/^/  /' "$out/startup.txt"
  echo "elapsed        $(( $(date +%s) - start )) s   (full logs: $out)"
  echo "========================================================================"
  [ "$trc" -eq 0 ] && [ "$src" -eq 0 ] && [ "$crc" -eq 0 ] && [ "$corc" -eq 0 ] && [ "$rrc" -eq 0 ] &&
    [ "$rnrc" -eq 0 ] && [ "$frc" -eq 0 ] && [ "$mrc" -eq 0 ] && [ "$grc" -eq 0 ] && [ "$brc" -eq 0 ]
}

case ${1:-run} in
  prepare) shift; prepare "$@" ;;
  run) run ;;
  *) echo "usage: $0 prepare [BUILD_DIR] | run"; exit 2 ;;
esac
